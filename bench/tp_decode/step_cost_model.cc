// Per-layer byte counts are computed once; a step adds the experts it hit and its KV traffic.
#include "bench/tp_decode/step_cost_model.h"

#include "common/error.h"

namespace tpserve::bench {

StepCostModel::StepCostModel(const ModelSpec& spec, const ShardLayout& layout, int weight_bytes, int kv_bytes)
    : spec_(spec), layout_(layout), weight_bytes_(weight_bytes), kv_bytes_(kv_bytes) {
  TPS_CHECK(weight_bytes > 0 && kv_bytes > 0, "element sizes must be positive");
  const double h = spec.hidden_size, d = spec.head_dim, wb = weight_bytes;
  const double hq = layout.local_q_heads(spec), hkv = layout.local_kv_heads(spec);
  attention_bytes_ = wb * (2 * h + (hq + 2 * hkv) * d * h + 2 * d + h * hq * d);
  router_bytes_ = wb * spec.num_experts * h;
  dense_mlp_bytes_ = wb * 3.0 * layout.local_dense_intermediate(spec) * h;
  expert_bytes_ = wb * 3.0 * layout.local_moe_intermediate(spec) * h;
  vocab_bytes_ = wb * static_cast<double>(layout.local_vocab(spec)) * h;
  kv_token_layer_bytes_ = static_cast<double>(kv_bytes) * 2 * hkv * d;
}

double StepCostModel::resident_weight_bytes() const {
  double bytes =
      vocab_bytes_ * (spec_.tie_word_embeddings ? 1 : 2) + weight_bytes_ * double(spec_.hidden_size);
  for (int l = 0; l < spec_.num_layers; ++l) {
    bytes += attention_bytes_;
    bytes += spec_.is_moe_layer(l) ? router_bytes_ + expert_bytes_ * layout_.local_experts(spec_)
                                   : dense_mlp_bytes_;
  }
  return bytes;
}

StepBytes StepCostModel::step_bytes(const StepShape& shape, const RoutingStats& routing) const {
  TPS_CHECK(static_cast<int>(routing.experts_hit.size()) == spec_.num_layers, "routing of ",
            routing.experts_hit.size(), " layers for a model of ", spec_.num_layers);
  StepBytes b;
  const int first = layout_.first_expert(spec_), end = first + layout_.local_experts(spec_);
  for (int l = 0; l < spec_.num_layers; ++l) {
    b.dense_weights += attention_bytes_;
    if (!spec_.is_moe_layer(l)) {
      b.dense_weights += dense_mlp_bytes_;
      continue;
    }
    b.dense_weights += router_bytes_;
    int local_hits = 0;
    for (int32_t e : routing.experts_hit[l]) local_hits += e >= first && e < end;
    b.expert_weights += expert_bytes_ * local_hits;
  }
  b.dense_weights += weight_bytes_ * double(spec_.hidden_size);  // final norm
  if (shape.samples > 0) b.dense_weights += vocab_bytes_;        // lm_head slice
  b.kv_read = kv_token_layer_bytes_ * double(shape.context_tokens) * spec_.num_layers;
  b.kv_write = kv_token_layer_bytes_ * double(shape.tokens) * spec_.num_layers;
  b.embedding = weight_bytes_ * double(spec_.hidden_size) * shape.tokens / layout_.tp_size;
  return b;
}

nlohmann::json StepCostModel::describe() const {
  return {{"weight_bytes_per_element", weight_bytes_},
          {"kv_bytes_per_element", kv_bytes_},
          {"resident_weight_bytes", resident_weight_bytes()},
          {"expert_bytes", expert_bytes_},
          {"local_experts", layout_.local_experts(spec_)},
          {"attention_bytes_per_layer", attention_bytes_},
          {"lm_head_bytes", vocab_bytes_},
          {"kv_bytes_per_token", kv_token_layer_bytes_ * spec_.num_layers}};
}

double hbm_floor_seconds(double bytes, double gbytes_per_second) {
  TPS_CHECK(gbytes_per_second > 0, "bandwidth must be positive");
  return bytes / (gbytes_per_second * 1e9);
}

}  // namespace tpserve::bench
