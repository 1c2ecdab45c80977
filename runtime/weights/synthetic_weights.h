// SyntheticWeights: deterministic random weights for a ModelSpec and a seed, computed on the fly.
//
// Nothing is materialised: construction only lists the tensors (expected_tensors(spec, kPerExpert), so the
// mtp.* head appears when spec.num_nextn_predict_layers > 0), and read() computes exactly the requested
// slice. A 30B-parameter spec is cheap to build and a slice costs only its own elements.
//
// Every tensor is BF16. Element i (flat row-major index) of tensor `name` is
//   key = splitmix64(splitmix64(seed) ^ fnv1a64(name))
//   z   = mix64(key + (i + 1) * 0x9E3779B97F4A7C15)          (one splitmix64 step, counter-based)
//   u   = (z >> 40) * 2^-23 - 1                                (uniform in [-1, 1), 24 bits)
//   v   = bf16(offset + scale * u)
// so reading as F32 gives exactly the bf16 values and reading as BF16 gives their bits.
//
// Scales (H = hidden_size, L = num_layers, `in` = the tensor's last dimension; u has variance 1/3, so
// sqrt(3/in) * u gives a linear layer with unit-variance outputs for unit-variance inputs):
//   RMSNorm weights (input_layernorm, post_attention_layernorm, q_norm, k_norm, model.norm, mtp.norm,
//   mtp.pre_fc_norm_*)                                : 1 + 0.1 * u
//   model.embed_tokens                                : sqrt(3) * u                     (unit variance)
//   q/k/v_proj, gate_proj, up_proj (dense and expert) : sqrt(3 / in) * u
//   o_proj, down_proj (dense and expert)              : sqrt(3 / in) / sqrt(2 L) * u    (residual stays O(1))
//   mlp.gate (router)                                 : 4 * sqrt(3 / in) * u            (peaky top-k)
//   lm_head                                           : 2 * sqrt(3 / in) * u            (non-flat logits)
//   mtp.fc                                            : sqrt(3 / (2 H)) * u
// Reads of more than about a million elements are split across std::thread::hardware_concurrency() threads.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/model/model_spec.h"
#include "runtime/weights/weight_source.h"

namespace tpserve {

class SyntheticWeights : public WeightSource {
 public:
  SyntheticWeights(const ModelSpec& spec, uint64_t seed);

  bool has(const std::string& name) const override;
  TensorMeta meta(const std::string& name) const override;
  std::vector<std::string> names() const override;
  void read(const std::string& name, std::span<const Range> ranges, DType out_dtype,
            void* dst) const override;
  std::string describe() const override;
  std::optional<SyntheticSlice> synthetic_slice(const std::string& name,
                                                std::span<const Range> ranges) const override;

  const ModelSpec& spec() const { return spec_; }
  uint64_t seed() const { return seed_; }

 private:
  struct Entry {
    std::vector<int64_t> shape;
    uint64_t key = 0;     // per-tensor stream key (seed mixed with the name's hash)
    float offset = 0.0f;  // value = offset + scale * u
    float scale = 0.0f;
  };
  const Entry& entry(const std::string& name) const;

  ModelSpec spec_;
  uint64_t seed_ = 0;
  std::vector<std::string> names_;  // checkpoint order
  std::unordered_map<std::string, Entry> entries_;
};

}  // namespace tpserve
