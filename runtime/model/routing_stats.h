// RoutingStats: which experts each MoE layer selected in the model's last step. The weight bytes a decode
// step must read depend on how many distinct experts its tokens hit, so cost models (bench/tp_decode's
// StepCostModel) need the routing actually taken. Recorded only when ModelOptions::record_routing is set:
// the top-k ids of every layer then land in a buffer of their own (no extra op in the step), and nothing is
// copied or counted until Qwen3MoeModel::last_step_routing() is asked, outside the timed step.
#pragma once

#include <cstdint>
#include <vector>

namespace tpserve {

struct RoutingStats {
  int tokens = 0;  // tokens in the step
  // [layer] distinct global expert ids selected, ascending; empty for dense layers. What this rank saw: every
  // token of the step (TP-sharded MoE, EP with all-reduce dispatch), or under EP all-to-all dispatch the
  // (token, slot) pairs this rank received for its own experts.
  std::vector<std::vector<int32_t>> experts_hit;

  int distinct_experts(int layer) const { return static_cast<int>(experts_hit.at(layer).size()); }
};

}  // namespace tpserve
