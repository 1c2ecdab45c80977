// Top-k softmax gating of one token by one warp, shared by the gating kernel (kernels/topk_gating.cu) and
// the fused router (kernels/router_fused.cu). Lane l holds experts l, l + 32, ... in registers; k rounds of
// a warp arg-max over (probability desc, index asc) pick the experts in order, as the CPU's sort does.
#pragma once

#include <climits>

#include "kernels/device_common.cuh"
#include "kernels/topk_gating.h"

namespace tpserve::kernels {

// logits: the token's [E] (global or shared memory); weights, ids: its [k]. Every lane of the warp calls it.
// kPerLane experts per lane: sized to the model (128 experts: 4), so that the softmax and each of the k
// arg-max rounds touch only the registers that hold experts.
template <int kPerLane>
__device__ __forceinline__ void warp_topk_gating(const float* logits, int num_experts, int k,
                                                 bool renormalize, float* weights, int32_t* ids) {
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
  float picked_prob[kGatingMaxK];
  int picked_id[kGatingMaxK];
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
    picked_prob[j] = best;
    picked_id[j] = best_id;
    picked_sum += best;  // in pick order, as the CPU reference sums
  }
  if (lane == 0) {
#pragma unroll
    for (int j = 0; j < kGatingMaxK; ++j) {
      if (j >= k) break;
      weights[j] = renormalize ? picked_prob[j] / picked_sum : picked_prob[j];
      ids[j] = picked_id[j];
    }
  }
}

}  // namespace tpserve::kernels
