// StepCostModel: the bytes of device memory one rank must move for one step, from the model's shape
// (ModelSpec), this rank's shard (ShardLayout), the step's shape and the experts its tokens actually hit
// (RoutingStats). Over the memory bandwidth measured in the same run this gives the step's floor: decode is
// memory bound, so no implementation runs much under it, and measured time over the floor is the gap.
//
// Counted: every weight the step reads once (attention, norms, router, dense MLPs, final norm, lm_head when
// rows are sampled), the weights of each expert hit that this rank holds (its TP slice, or whole under EP),
// the paged KV cache the attention reads (every sequence's context) and writes (the step's tokens), and the
// embedding rows of the step's tokens (spread over the vocabulary-parallel ranks: an estimate). Activations
// and the MTP head (not run by the engine yet) are not counted: at decode they are a small share.
#pragma once

#include <nlohmann/json.hpp>

#include "runtime/model/routing_stats.h"
#include "runtime/model/shard_layout.h"

namespace tpserve::bench {

struct StepShape {
  int tokens = 0;              // rows of the forward
  int samples = 0;             // rows sampled (lm_head runs when > 0)
  int64_t context_tokens = 0;  // sum over sequences of their cached tokens after the step
};

struct StepBytes {
  double dense_weights = 0;   // read whatever the routing
  double expert_weights = 0;  // experts hit that this rank holds
  double kv_read = 0;
  double kv_write = 0;
  double embedding = 0;
  double total() const { return dense_weights + expert_weights + kv_read + kv_write + embedding; }
};

class StepCostModel {
 public:
  // weight_bytes / kv_bytes: bytes per element as the backend stores them (bf16 on CUDA: 2; CPU: f32, 4).
  StepCostModel(const ModelSpec& spec, const ShardLayout& layout, int weight_bytes, int kv_bytes);

  // One expert's weights on this rank (gate, up and down; a TP slice or the whole expert).
  double expert_bytes() const { return expert_bytes_; }
  // Everything this rank holds (no MTP head); equals ModelWeights::bytes.
  double resident_weight_bytes() const;
  // routing.experts_hit must have one entry per layer.
  StepBytes step_bytes(const StepShape& shape, const RoutingStats& routing) const;
  nlohmann::json describe() const;

 private:
  ModelSpec spec_;
  ShardLayout layout_;
  int weight_bytes_, kv_bytes_;
  double attention_bytes_ = 0;  // per layer: norms, qkv, q/k norms, o_proj
  double router_bytes_ = 0;     // per MoE layer
  double dense_mlp_bytes_ = 0;  // per dense layer
  double expert_bytes_ = 0;
  double vocab_bytes_ = 0;           // this rank's embedding (or lm_head) slice
  double kv_token_layer_bytes_ = 0;  // K and V of one token in one layer on this rank
};

// Seconds to move `bytes` at `gbytes_per_second` (10^9 bytes per second).
double hbm_floor_seconds(double bytes, double gbytes_per_second);

}  // namespace tpserve::bench
