// Top-k softmax gating of one token by one warp, shared by the gating kernel (kernels/topk_gating.cu) and
// the fused router (kernels/router_fused.cu). Lane l holds experts l, l + 32, ... in registers; k rounds of
// a warp arg-max over (probability desc, index asc) pick the experts in order, as the CPU's sort does.
#pragma once

#include <climits>

#include "kernels/device_common.cuh"
#include "kernels/topk_gating.h"

namespace tpserve::kernels {

// One arg-max round: over the warp, the largest probability whose bit in `taken` is clear, ties to the
// smaller index; NaN is never picked. best = -1 and best_id = INT_MAX where no expert is left. With `redux`
// (SM80+) the lanes' candidates meet in two warp reductions (redux.sync: the largest key, then the smallest
// index holding it) instead of five shuffle steps of (value, index) pairs: the probabilities are >= 0, so
// their bit patterns order as their values, and key 0 stands for a lane without a candidate. The same pick.
template <int kPerLane>
__device__ __forceinline__ void warp_argmax_round(const float (&prob)[kPerLane], uint32_t taken,
                                                  int num_experts, bool redux, float& best, int& best_id) {
  const int lane = threadIdx.x % kWarpSize;
  best = -1.0f, best_id = INT_MAX;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const int e = lane + i * kWarpSize;
    if (e < num_experts && !(taken >> i & 1u) && prob[i] > best) best = prob[i], best_id = e;
  }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if (redux) {
    const uint32_t key = best_id == INT_MAX ? 0u : __float_as_uint(best) + 1u;
    const uint32_t top = __reduce_max_sync(0xffffffffu, key);
    const uint32_t id =
        __reduce_min_sync(0xffffffffu, key == top ? static_cast<uint32_t>(best_id) : UINT_MAX);
    if (top != 0u)
      best = __uint_as_float(top - 1u), best_id = static_cast<int>(id);  // else as every lane has
    return;
  }
#endif
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    const float other = __shfl_xor_sync(0xffffffffu, best, offset);
    const int other_id = __shfl_xor_sync(0xffffffffu, best_id, offset);
    if (other > best || (other == best && other_id < best_id)) best = other, best_id = other_id;
  }
}

static_assert(kGatingMaxK <= kWarpSize, "lane j keeps pick j");

// logits: the token's [E] (global or shared memory); weights, ids: its [k]. Every lane of the warp calls it.
// kPerLane experts per lane: sized to the model (128 experts: 4), so that the softmax and each of the k
// arg-max rounds touch only the registers that hold experts. redux: warp_argmax_round.
template <int kPerLane>
__device__ __forceinline__ void warp_topk_gating(const float* logits, int num_experts, int k,
                                                 bool renormalize, float* weights, int32_t* ids, bool redux) {
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

  // The k rounds as a loop, not unrolled: the router runs this once a layer, from code the other kernels have
  // pushed out of the instruction cache: phase marks put the unrolled rounds at 4349-4393 cycles on an H100,
  // the loop at 3296 (docs/PERF.md, thirty-second and thirty-third sessions). Lane j keeps pick j in
  // registers; every lane sums the picks in pick order, as the CPU reference does.
  uint32_t taken = 0;  // bit i: expert lane + 32 i already picked
  float my_prob = 0.0f, picked_sum = 0.0f;
  int my_id = 0;
#pragma unroll 1
  for (int j = 0; j < k; ++j) {
    float best;
    int best_id;
    warp_argmax_round<kPerLane>(prob, taken, num_experts, redux, best, best_id);
    if (best_id != INT_MAX && best_id % kWarpSize == lane) taken |= 1u << (best_id / kWarpSize);
    if (lane == j) my_prob = best, my_id = best_id;
    picked_sum += best;
  }
  if (lane < k) {
    weights[lane] = renormalize ? my_prob / picked_sum : my_prob;
    ids[lane] = my_id;
  }
}

}  // namespace tpserve::kernels
