// The gating of one token by one warp (kernels/topk_gating.h): softmax over the token's logits, then the k
// most probable experts in order. Shared by the top-k kernel and the MoE expert kernels that gate their one
// token themselves (MoeExpertsParams::gating_logits), so that both pick and weigh alike, bit for bit.
// Lane l holds experts l, l + 32, ... (kPerLane of them) in registers; each pick is a warp arg-max over
// (probability desc, index asc), as the CPU's sort orders them.
#pragma once

#include <climits>

#include "kernels/device_common.cuh"
#include "kernels/topk_gating.h"

namespace tpserve::kernels {

template <int kPerLane>
struct WarpGating {
  float prob[kPerLane];  // softmax probability of expert lane + 32 i
  uint32_t taken = 0;    // bit i: expert lane + 32 i already picked

  // Every lane of the warp calls it (the reductions shuffle over the whole warp).
  __device__ __forceinline__ WarpGating(const float* logits, int num_experts) {
    const int lane = threadIdx.x % kWarpSize;
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
  }

  // The next most probable expert not picked yet, on every lane: its probability and index.
  __device__ __forceinline__ void pick(int num_experts, float& best, int& best_id) {
    const int lane = threadIdx.x % kWarpSize;
    best = -1.0f;
    best_id = INT_MAX;
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
  }
};

// The token's k picks in order into ids / weights (lane 0 stores; weights renormalised to sum to one when
// asked, the sum taken in pick order as the CPU reference does). Returns pick `which`'s index, on every lane.
template <int kPerLane>
__device__ __forceinline__ int warp_topk(WarpGating<kPerLane>& gating, int num_experts, int k,
                                         bool renormalize, int32_t* ids, float* weights, int which = 0) {
  float picked_prob[kGatingMaxK];
  int picked_id[kGatingMaxK];
  float picked_sum = 0.0f;
  int chosen = 0;
#pragma unroll
  for (int j = 0; j < kGatingMaxK; ++j) {
    if (j >= k) break;
    gating.pick(num_experts, picked_prob[j], picked_id[j]);
    picked_sum += picked_prob[j];
    if (j == which) chosen = picked_id[j];
  }
  if (threadIdx.x % kWarpSize == 0) {
#pragma unroll
    for (int j = 0; j < kGatingMaxK; ++j) {
      if (j >= k) break;
      weights[j] = renormalize ? picked_prob[j] / picked_sum : picked_prob[j];
      ids[j] = picked_id[j];
    }
  }
  return chosen;
}

}  // namespace tpserve::kernels
