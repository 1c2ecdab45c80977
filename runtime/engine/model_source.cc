#include "runtime/engine/model_source.h"

#include <filesystem>

#include "runtime/weights/checkpoint.h"
#include "runtime/weights/synthetic_weights.h"

namespace tpserve {

ModelSource open_model_source(const ModelConfig& config) {
  ModelSource m;
  if (config.synthetic) {
    const auto& syn = *config.synthetic;
    m.spec = preset_model_spec(syn.preset, syn.layers, syn.vocab);
    if (syn.mtp) m.spec.num_nextn_predict_layers = 1;
    m.weights = std::make_unique<SyntheticWeights>(m.spec, syn.seed);
    m.name = config.served_name.empty() ? "synthetic-" + syn.preset : config.served_name;
    return m;
  }
  m.spec = load_model_spec(config.path);
  m.weights = std::make_unique<Checkpoint>(config.path);
  m.generation = load_generation_defaults(config.path);
  m.name = config.served_name.empty()
               ? std::filesystem::path(config.path).lexically_normal().filename().string()
               : config.served_name;
  if (m.name.empty()) m.name = std::filesystem::path(config.path).parent_path().filename().string();
  return m;
}

LayoutFacts layout_facts(const ModelSpec& s) {
  bool dense = false;
  for (int l = 0; l < s.num_layers; ++l) dense |= !s.is_moe_layer(l);
  return LayoutFacts{.num_attention_heads = s.num_attention_heads,
                     .num_key_value_heads = s.num_key_value_heads,
                     .num_experts = s.num_experts,
                     .moe_intermediate_size = s.moe_intermediate_size,
                     .dense_intermediate_size = dense ? s.intermediate_size : 0,
                     .vocab_size = s.vocab_size,
                     .has_mtp = s.num_nextn_predict_layers > 0};
}

}  // namespace tpserve
