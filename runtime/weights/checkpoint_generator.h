// Writes a synthetic model as a Hugging Face checkpoint directory: config.json, generation_config.json,
// sharded bf16 safetensors with model.safetensors.index.json, and (when given) the tokenizer files. The
// weights are SyntheticWeights(spec, seed), so a checkpoint written here and `model.synthetic` with the same
// preset and seed hold identical values.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/model/model_spec.h"

namespace tpserve {

struct CheckpointGeneratorOptions {
  uint64_t seed = 0;
  uint64_t shard_bytes = uint64_t(2) << 30;  // start a new shard past this size
  std::string tokenizer;                     // tokenizer.json to copy (optional)
};

// Returns the number of shards written. Throws tpserve::Error naming the path on I/O errors.
int write_synthetic_checkpoint(const ModelSpec& spec, const std::string& out_dir,
                               const CheckpointGeneratorOptions& o);

}  // namespace tpserve
