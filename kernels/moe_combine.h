// MoE combine: out[t] = sum over slots j (in order) of weight[t, j] * y[source(t, j)], fp32 sums, bf16 out.
// Used after the fused experts (source = t * k + j, slots of experts held elsewhere skipped) and after the
// expert-parallel all-to-all (source = origin[t, j]).
#pragma once

#include "kernels/kernel_api.h"

namespace tpserve::kernels {

struct MoeCombineParams {
  const float* y_f32 = nullptr;       // [rows, H] expert outputs, or
  const bf16* y_bf16 = nullptr;       // [rows, H] (exactly one of the two is set)
  const int32_t* origin = nullptr;    // [T, k] source row of slot (t, j); nullptr: row t * k + j
  const int32_t* topk_ids = nullptr;  // [T, k] or nullptr; when set, only slots whose expert is in
  int expert_begin = 0;               //   [expert_begin, expert_begin + num_experts) contribute
  int num_experts = 0;
  const float* weights = nullptr;  // [T, k]
  bf16* out = nullptr;             // [T, H]
  int tokens = 0;                  // T
  int k = 0;
  int hidden = 0;  // H, a multiple of 8
  // Each slot's loads after the previous slot's sum (the earlier code, for A/B) instead of up to
  // kCombineSlotsAtOnce slots' loads issued together; the sums are the same either way.
  bool one_slot_at_a_time = false;
};

void launch_moe_combine(const MoeCombineParams& p, cudaStream_t stream, const LaunchPolicy& policy);

}  // namespace tpserve::kernels
