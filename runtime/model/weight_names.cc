#include "runtime/model/weight_names.h"

namespace tpserve {
namespace weight_names {
std::string layer_prefix(int layer) {
  return "model.layers." + std::to_string(layer) + ".";
}
std::string embed_tokens() {
  return "model.embed_tokens.weight";
}
std::string final_norm() {
  return "model.norm.weight";
}
std::string lm_head() {
  return "lm_head.weight";
}
std::string expert(int layer, int e, const char* proj) {
  return layer_prefix(layer) + "mlp.experts." + std::to_string(e) + "." + proj + ".weight";
}
std::string fused_gate_up(int layer) {
  return layer_prefix(layer) + "mlp.experts.gate_up_proj";
}
std::string fused_down(int layer) {
  return layer_prefix(layer) + "mlp.experts.down_proj";
}
std::string mtp_prefix() {
  return "mtp.";
}
}  // namespace weight_names

namespace {

// One decoder layer's tensors under `prefix` ("model.layers.L." or "mtp.layers.0.").
void add_decoder_layer(std::vector<ExpectedTensor>& out, const ModelSpec& s, const std::string& prefix,
                       bool moe, ExpertLayout layout) {
  const int64_t h = s.hidden_size, q = s.q_size(), kv = s.kv_size(), d = s.head_dim;
  out.push_back({prefix + "input_layernorm.weight", {h}});
  out.push_back({prefix + "self_attn.q_proj.weight", {q, h}});
  out.push_back({prefix + "self_attn.k_proj.weight", {kv, h}});
  out.push_back({prefix + "self_attn.v_proj.weight", {kv, h}});
  out.push_back({prefix + "self_attn.o_proj.weight", {h, q}});
  out.push_back({prefix + "self_attn.q_norm.weight", {d}});
  out.push_back({prefix + "self_attn.k_norm.weight", {d}});
  out.push_back({prefix + "post_attention_layernorm.weight", {h}});
  if (!moe) {
    const int64_t i = s.intermediate_size;
    out.push_back({prefix + "mlp.gate_proj.weight", {i, h}});
    out.push_back({prefix + "mlp.up_proj.weight", {i, h}});
    out.push_back({prefix + "mlp.down_proj.weight", {h, i}});
    return;
  }
  const int64_t e = s.num_experts, i = s.moe_intermediate_size;
  out.push_back({prefix + "mlp.gate.weight", {e, h}});
  if (layout == ExpertLayout::kFused) {
    out.push_back({prefix + "mlp.experts.gate_up_proj", {e, 2 * i, h}});
    out.push_back({prefix + "mlp.experts.down_proj", {e, h, i}});
    return;
  }
  for (int x = 0; x < e; ++x) {
    const std::string ep = prefix + "mlp.experts." + std::to_string(x) + ".";
    out.push_back({ep + "gate_proj.weight", {i, h}});
    out.push_back({ep + "up_proj.weight", {i, h}});
    out.push_back({ep + "down_proj.weight", {h, i}});
  }
}

}  // namespace

std::vector<ExpectedTensor> expected_tensors(const ModelSpec& s, ExpertLayout layout) {
  std::vector<ExpectedTensor> out;
  const int64_t h = s.hidden_size, v = s.vocab_size;
  out.push_back({weight_names::embed_tokens(), {v, h}});
  for (int l = 0; l < s.num_layers; ++l)
    add_decoder_layer(out, s, weight_names::layer_prefix(l), s.is_moe_layer(l), layout);
  out.push_back({weight_names::final_norm(), {h}});
  if (!s.tie_word_embeddings) out.push_back({weight_names::lm_head(), {v, h}});
  if (s.num_nextn_predict_layers > 0) {
    const std::string m = weight_names::mtp_prefix();
    out.push_back({m + "fc.weight", {h, 2 * h}});
    out.push_back({m + "pre_fc_norm_embedding.weight", {h}});
    out.push_back({m + "pre_fc_norm_hidden.weight", {h}});
    // The MTP layer is a full-attention MoE layer when the model has experts.
    add_decoder_layer(out, s, m + "layers.0.", s.num_experts > 0, layout);
    out.push_back({m + "norm.weight", {h}});
  }
  return out;
}

}  // namespace tpserve
