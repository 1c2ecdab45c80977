// StepCostModel on the real Qwen3-30B-A3B shape: resident bytes, the bytes of a decode step from the experts
// it hit (TP-sharded experts and EP partitions), KV traffic, and the floor at a given bandwidth.
#include <gtest/gtest.h>

#include "bench/tp_decode/step_cost_model.h"
#include "common/error.h"

namespace tpserve::bench {
namespace {

RoutingStats routing_hitting(const ModelSpec& spec, int experts_per_layer) {
  RoutingStats r;
  r.tokens = 1;
  r.experts_hit.resize(spec.num_layers);
  for (auto& layer : r.experts_hit)
    for (int e = 0; e < experts_per_layer; ++e) layer.push_back(e * (spec.num_experts / experts_per_layer));
  return r;
}

TEST(StepCostModel, Qwen3_30B_A3B_OnOneGpu) {
  const ModelSpec spec = preset_model_spec("qwen3-30b-a3b");
  const StepCostModel model(spec, ShardLayout{}, 2, 2);
  // ~30.5 B parameters in bf16.
  EXPECT_NEAR(model.resident_weight_bytes() / 1e9, 2 * 30.53, 0.2);
  EXPECT_DOUBLE_EQ(model.expert_bytes(), 2.0 * 3 * 768 * 2048);

  // One decode token hitting 8 experts per layer: 3.04 B parameters read (the "3.3 B active" of the model's
  // name counts the whole embedding, of which a step reads one row); KV of 1000 cached tokens.
  const StepBytes b =
      model.step_bytes({.tokens = 1, .samples = 1, .context_tokens = 1000}, routing_hitting(spec, 8));
  EXPECT_DOUBLE_EQ(b.expert_weights, 48 * 8 * model.expert_bytes());
  EXPECT_NEAR((b.dense_weights + b.expert_weights) / 2 / 1e9, 3.04, 0.02);
  const double kv_per_token = 48.0 * 2 * 4 * 128 * 2;  // layers x (K, V) x kv heads x head dim x bf16
  EXPECT_DOUBLE_EQ(b.kv_read, 1000 * kv_per_token);
  EXPECT_DOUBLE_EQ(b.kv_write, kv_per_token);
  EXPECT_DOUBLE_EQ(b.total(), b.dense_weights + b.expert_weights + b.kv_read + b.kv_write + b.embedding);
  // At 4.8 TB/s (H200's datasheet) the floor of that step is about 1.29 ms.
  EXPECT_NEAR(hbm_floor_seconds(b.total(), 4800) * 1e3, 1.29, 0.02);

  // More experts hit: more bytes, in whole experts.
  const StepBytes wide =
      model.step_bytes({.tokens = 8, .samples = 8, .context_tokens = 8000}, routing_hitting(spec, 32));
  EXPECT_DOUBLE_EQ(wide.expert_weights, 48 * 32 * model.expert_bytes());
}

TEST(StepCostModel, ExpertsHeldElsewhereCostNothingUnderEp) {
  const ModelSpec spec = preset_model_spec("qwen3-30b-a3b");
  ShardLayout rank1{.tp_rank = 1, .tp_size = 2, .ep_rank = 1, .ep_size = 2, .expert_parallel = true};
  const StepCostModel ep(spec, rank1, 2, 2);
  EXPECT_DOUBLE_EQ(ep.expert_bytes(), 2.0 * 3 * 768 * 2048);  // whole experts
  RoutingStats r;
  r.experts_hit.assign(spec.num_layers, {0, 5, 64, 100});  // rank 1 holds experts 64..127
  EXPECT_DOUBLE_EQ(ep.step_bytes({.tokens = 1, .samples = 1, .context_tokens = 0}, r).expert_weights,
                   48 * 2 * ep.expert_bytes());

  ShardLayout tp1{.tp_rank = 1, .tp_size = 2};  // TP-sharded experts: half of every expert
  const StepCostModel tp(spec, tp1, 2, 2);
  EXPECT_DOUBLE_EQ(tp.expert_bytes(), ep.expert_bytes() / 2);
  EXPECT_DOUBLE_EQ(tp.step_bytes({.tokens = 1, .samples = 1, .context_tokens = 0}, r).expert_weights,
                   48 * 4 * tp.expert_bytes());
  EXPECT_THROW(tp.step_bytes({}, RoutingStats{}), Error);  // routing of the wrong number of layers
}

TEST(StepCostModel, NoSampledRowsSkipTheLmHead) {
  const ModelSpec spec = preset_model_spec("tiny");
  const StepCostModel model(spec, ShardLayout{}, 4, 4);
  const RoutingStats r = routing_hitting(spec, 2);
  const double with = model.step_bytes({.tokens = 4, .samples = 1, .context_tokens = 4}, r).dense_weights;
  const double without = model.step_bytes({.tokens = 4, .samples = 0, .context_tokens = 4}, r).dense_weights;
  EXPECT_DOUBLE_EQ(with - without, 4.0 * spec.vocab_size * spec.hidden_size);
}

}  // namespace
}  // namespace tpserve::bench
