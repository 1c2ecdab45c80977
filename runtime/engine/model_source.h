// Resolves what the config names as the model into a ModelSpec, its weights (checkpoint or synthetic) and
// the sampling defaults of generation_config.json.
#pragma once

#include <memory>

#include "runtime/config/config.h"
#include "runtime/model/model_spec.h"
#include "runtime/weights/weight_source.h"

namespace tpserve {

struct ModelSource {
  ModelSpec spec;
  std::unique_ptr<WeightSource> weights;  // until the engine has loaded them (then released)
  GenerationDefaults generation;
  std::string name;  // served model name
};

ModelSource open_model_source(const ModelConfig& config);
LayoutFacts layout_facts(const ModelSpec& spec);

}  // namespace tpserve
