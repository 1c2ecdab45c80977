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
// The softmax of one token's [E] logits over the warp: lane l's prob[i] is expert l + 32 i's probability (0
// past E). Every lane ends with the same max and sum (butterfly reductions), so every warp that runs it on
// the same logits holds the same bits.
template <int kPerLane>
__device__ __forceinline__ void warp_softmax(const float* logits, int num_experts, float (&prob)[kPerLane]) {
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

template <int kPerLane>
__device__ __forceinline__ void warp_topk_gating(const float* logits, int num_experts, int k,
                                                 bool renormalize, float* weights, int32_t* ids, bool redux) {
  const int lane = threadIdx.x % kWarpSize;
  float prob[kPerLane];
  warp_softmax<kPerLane>(logits, num_experts, prob);

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

// Shared memory of ranked_topk_gating for one token: every warp's copy of the probabilities, then the picks.
template <int kPerLane>
struct RankedGatingScratch {
  float probs[kPerLane][kPerLane * kWarpSize];  // [warp][expert]; -1 for an expert that is no candidate
  float pick_prob[kGatingMaxK];
  int32_t pick_id[kGatingMaxK];
};

// The same picks, weights and order as warp_topk_gating, by kPerLane warps at once instead of k dependent
// arg-max rounds: each warp computes the softmax (the same bits in every warp), and lane l of warp w (the
// warp's index within the group: threadIdx.x / 32 % kPerLane) ranks expert e = l + 32 w by counting the
// experts ahead of it in (probability desc, index asc) order; the expert of rank r < k is pick r. NaN
// probabilities and experts past E are no candidates; where fewer than k are left, the last picks are
// (-1, INT_MAX) as the rounds give. Every lane of the group's warps calls it with the same arguments;
// `barrier` is a named barrier id (1..15) the group's kPerLane * 32 threads own.
template <int kPerLane>
__device__ __forceinline__ void ranked_topk_gating(const float* logits, int num_experts, int k,
                                                   bool renormalize, float* weights, int32_t* ids,
                                                   RankedGatingScratch<kPerLane>& s, int barrier) {
  const int lane = threadIdx.x % kWarpSize, w = threadIdx.x / kWarpSize % kPerLane;
  float prob[kPerLane];
  warp_softmax<kPerLane>(logits, num_experts, prob);
  float mine = 0.0f;
  int candidates = 0;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const bool candidate = lane + i * kWarpSize < num_experts && !isnan(prob[i]);
    s.probs[w][lane + i * kWarpSize] = candidate ? prob[i] : -1.0f;
    candidates += __popc(__ballot_sync(0xffffffffu, candidate));
    if (i == w) mine = candidate ? prob[i] : -1.0f;
  }
  __syncwarp();
  const int e = lane + w * kWarpSize;
  int rank = 0;  // experts ahead of e: a larger probability, or the same and a smaller index
  const float4* all = reinterpret_cast<const float4*>(s.probs[w]);
#pragma unroll 4
  for (int j4 = 0; j4 < kPerLane * kWarpSize / 4; ++j4) {
    const float4 v = all[j4];
    const int j = 4 * j4;
    rank += (v.x > mine || (v.x == mine && j < e)) + (v.y > mine || (v.y == mine && j + 1 < e)) +
            (v.z > mine || (v.z == mine && j + 2 < e)) + (v.w > mine || (v.w == mine && j + 3 < e));
  }
  if (mine >= 0.0f && rank < k) s.pick_prob[rank] = mine, s.pick_id[rank] = e;
  asm volatile("bar.sync %0, %1;" ::"r"(barrier), "r"(kPerLane * kWarpSize) : "memory");
  if (w != 0) return;
  float picked_sum = 0.0f, my_prob = 0.0f;
  int my_id = 0;
  for (int j = 0; j < k; ++j) {  // in pick order, as the rounds sum
    const float best = j < candidates ? s.pick_prob[j] : -1.0f;
    if (lane == j) my_prob = best, my_id = j < candidates ? s.pick_id[j] : INT_MAX;
    picked_sum += best;
  }
  if (lane < k) {
    weights[lane] = renormalize ? my_prob / picked_sum : my_prob;
    ids[lane] = my_id;
  }
}

}  // namespace tpserve::kernels
