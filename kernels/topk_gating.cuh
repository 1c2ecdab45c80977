// Top-k softmax gating of one token by one warp, for the top-k kernel and the fused MoE routing
// (kernels/moe_experts.cu). Lane l holds experts l, l + 32, ... in registers; k rounds of a warp arg-max over
// (probability desc, index asc) pick the experts in order, as the CPU's sort does.
#pragma once

#include <climits>

#include "kernels/device_common.cuh"
#include "kernels/topk_gating.h"

namespace tpserve::kernels {

// All 32 lanes call it; every lane ends with the same picks: weight[j], id[j] for j < k, most probable
// first (weights renormalised to sum to one when asked).
__device__ __forceinline__ void warp_topk_gating(const float* logits /*[E]*/, int num_experts, int k,
                                                 bool renormalize, float (&weight)[kGatingMaxK],
                                                 int (&id)[kGatingMaxK]) {
  constexpr int kPerLane = kGatingMaxExperts / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  float prob[kPerLane];
  float max_logit = -INFINITY;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const int e = lane + i * kWarpSize;
    prob[i] = e < num_experts ? logits[e] : -INFINITY;
    max_logit = fmaxf(max_logit, prob[i]);
  }
  max_logit = warp_max(max_logit);
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    prob[i] = lane + i * kWarpSize < num_experts ? expf(prob[i] - max_logit) : 0.0f;
    sum += prob[i];
  }
  sum = warp_sum(sum);
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) prob[i] /= sum;

  uint32_t taken = 0;  // bit i: expert lane + 32 i already picked
  float picked_sum = 0.0f;
#pragma unroll
  for (int j = 0; j < kGatingMaxK; ++j) {
    if (j >= k) break;
    float best = -1.0f;
    int best_id = INT_MAX;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      const int e = lane + i * kWarpSize;
      if (e < num_experts && !(taken >> i & 1u) && prob[i] > best) best = prob[i], best_id = e;
    }
#pragma unroll
    for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
      const float other = __shfl_xor_sync(0xffffffffu, best, offset);
      const int other_id = __shfl_xor_sync(0xffffffffu, best_id, offset);
      if (other > best || (other == best && other_id < best_id)) best = other, best_id = other_id;
    }
    if (best_id % kWarpSize == lane) taken |= 1u << (best_id / kWarpSize);
    weight[j] = best;
    id[j] = best_id;
    picked_sum += best;  // in pick order, as the CPU reference sums
  }
  if (renormalize) {
#pragma unroll
    for (int j = 0; j < kGatingMaxK; ++j)
      if (j < k) weight[j] /= picked_sum;
  }
}

}  // namespace tpserve::kernels
