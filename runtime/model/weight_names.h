// Hugging Face tensor names of a Qwen3-MoE checkpoint and the shape each must have for a ModelSpec.
// Expert weights come per expert (`mlp.experts.E.gate_proj.weight`, [I, H]) or fused in 3-D tensors
// (`mlp.experts.gate_up_proj` [E, 2I, H], gate rows first, and `mlp.experts.down_proj` [E, H, I]) as
// transformers 5.x keeps them; both are accepted (see ExpertLayout).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/model/model_spec.h"

namespace tpserve {

struct ExpectedTensor {
  std::string name;
  std::vector<int64_t> shape;
};

namespace weight_names {
std::string layer_prefix(int layer);  // "model.layers.L."
std::string embed_tokens();           // "model.embed_tokens.weight"
std::string final_norm();             // "model.norm.weight"
std::string lm_head();                // "lm_head.weight" (absent when tie_word_embeddings)
std::string expert(int layer, int expert, const char* proj);  // proj: gate_proj | up_proj | down_proj
std::string fused_gate_up(int layer);                         // "model.layers.L.mlp.experts.gate_up_proj"
std::string fused_down(int layer);                            // "model.layers.L.mlp.experts.down_proj"
std::string mtp_prefix();                                     // "mtp."
}  // namespace weight_names

enum class ExpertLayout { kPerExpert, kFused };

// Every tensor the model needs (per-expert layout for experts unless `layout` says fused), with shapes.
// With spec.num_nextn_predict_layers > 0 the mtp.* tensors are included.
std::vector<ExpectedTensor> expected_tensors(const ModelSpec& spec, ExpertLayout layout);

}  // namespace tpserve
