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

// The softmax first, then the rounds on the probabilities (warp_topk_gating with by_logits false).
// logits: the token's [E] (global or shared memory); weights, ids: its [k]. Every lane of the warp calls it.
// kPerLane experts per lane: sized to the model (128 experts: 4), so that the softmax and each of the k
// arg-max rounds touch only the registers that hold experts. redux: warp_argmax_round.
template <int kPerLane>
__device__ __forceinline__ void warp_topk_gating_by_probabilities(const float* logits, int num_experts, int k,
                                                                  bool renormalize, float* weights,
                                                                  int32_t* ids, bool redux) {
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

// --- Gating by the logits' order (TopkGatingParams::by_logits) ---
// The softmax is monotone, so the k most probable experts are the k largest logits: the arg-max rounds run on
// the logits, the first round's pick is the softmax's max, and the exponentials and their sum run beside
// the later rounds instead of before the first. Ties (equal logits) go to the smaller index; a NaN logit
// counts as -inf. The same picks, weights and bits as warp_topk_gating_by_probabilities but where two
// different logits' probabilities round equal (there the larger logit comes first; both are among the top k
// either way, or both are 0), and in rows where the probabilities are NaN (a NaN logit, a +inf logit, every
// logit -inf): the probabilities' order then picks no expert (ids INT_MAX), this gating picks the k largest
// logits (weights NaN where inf - inf made the sum NaN).

// An order key of a logit: unsigned integers ordered as the logits (NaN as -inf, -0 as +0). Every logit's
// key is at least 0x007fffff (that of -inf), so that 0 stands for no candidate.
__device__ __forceinline__ uint32_t logit_order_key(float x) {
  uint32_t u = isnan(x) ? 0xff800000u : __float_as_uint(x);
  if (u == 0x80000000u) u = 0u;
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
__device__ __forceinline__ float logit_of_order_key(uint32_t key) {
  return __uint_as_float((key & 0x80000000u) ? (key & 0x7fffffffu) : ~key);
}

// The warp's largest (kLargest) or smallest value: redux.sync on SM80+ where `redux`, else five shuffle
// steps.
template <bool kLargest>
__device__ __forceinline__ uint32_t warp_extreme_u32(uint32_t v, bool redux) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if (redux) return kLargest ? __reduce_max_sync(0xffffffffu, v) : __reduce_min_sync(0xffffffffu, v);
#endif
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    const uint32_t other = __shfl_xor_sync(0xffffffffu, v, offset);
    v = kLargest ? max(v, other) : min(v, other);
  }
  return v;
}

// The lane's largest key left and the first slot holding it (the smaller expert index on ties).
template <int kPerLane>
__device__ __forceinline__ void lane_head(const uint32_t (&key)[kPerLane], uint32_t& head_key,
                                          int& head_slot) {
  head_key = key[0], head_slot = 0;
#pragma unroll
  for (int i = 1; i < kPerLane; ++i)
    if (key[i] > head_key) head_key = key[i], head_slot = i;
}

// One arg-max round on the lanes' heads: returns the largest key; lane j keeps it and its expert; the lane
// that held it drops that slot and finds its next head.
template <int kPerLane>
__device__ __forceinline__ uint32_t logit_round(uint32_t (&key)[kPerLane], uint32_t& head_key, int& head_slot,
                                                int j, bool redux, uint32_t& my_key, int& my_id) {
  const int lane = threadIdx.x % kWarpSize;
  const uint32_t top = warp_extreme_u32<true>(head_key, redux);
  const int head_id = lane + kWarpSize * head_slot;
  const uint32_t holders = __ballot_sync(0xffffffffu, head_key == top);
  int winner = __ffs(static_cast<int>(holders)) - 1;
  if ((holders & (holders - 1u)) != 0u)  // equal logits: the smallest index (the same branch in every lane)
    winner =
        static_cast<int>(warp_extreme_u32<false>(head_key == top ? head_id : UINT_MAX, redux) % kWarpSize);
  const int id = __shfl_sync(0xffffffffu, head_id, winner);
  if (lane == j) my_key = top, my_id = id;
  const bool won = lane == winner;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i)
    if (won && i == head_slot) key[i] = 0u;
  lane_head(key, head_key, head_slot);
  return top;
}

// As warp_topk_gating_by_probabilities (the same arguments), by the logits' order. Each round: the warp's
// largest head key (one reduction), the lanes holding it by a ballot, and only where several do (equal
// logits) a second reduction for the smallest index; the winning lane drops its head and finds its next. The
// sum of the exponentials takes one butterfly step a round from the second round on, so its shuffles wait
// beside the rounds' reductions. Lane j keeps pick j; every lane sums the picks' probabilities in pick order,
// as the CPU reference does.
template <int kPerLane>
__device__ __forceinline__ void warp_topk_gating_by_logits(const float* logits, int num_experts, int k,
                                                           bool renormalize, float* weights, int32_t* ids,
                                                           bool redux) {
  const int lane = threadIdx.x % kWarpSize;
  float x[kPerLane];       // expert lane + 32 i's logit (NaN as -inf, -0 as +0); -inf past the experts
  uint32_t key[kPerLane];  // its order key; 0: past the experts or already picked
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const bool valid = lane + i * kWarpSize < num_experts;
    key[i] = valid ? logit_order_key(logits[lane + i * kWarpSize]) : 0u;
    x[i] = valid ? logit_of_order_key(key[i]) : -INFINITY;
  }
  uint32_t head_key, my_key = 0;  // my_key, my_id: lane j's pick j
  int head_slot, my_id = 0;
  lane_head(key, head_key, head_slot);
  const float max_logit = logit_of_order_key(logit_round(key, head_key, head_slot, 0, redux, my_key, my_id));
  float sum = 0.0f;  // the lane's exponentials, then the warp's butterfly steps (as warp_sum)
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const float v = expf(x[i] - max_logit);
    sum += lane + i * kWarpSize < num_experts ? v : 0.0f;
  }
#pragma unroll 1
  for (int j = 1; j < k; ++j) {
    const float other = j <= 5 ? __shfl_xor_sync(0xffffffffu, sum, kWarpSize >> j) : 0.0f;
    logit_round(key, head_key, head_slot, j, redux, my_key, my_id);
    if (j <= 5) sum += other;
  }
  for (int j = k; j <= 5; ++j) sum += __shfl_xor_sync(0xffffffffu, sum, kWarpSize >> j);
  const float prob = lane < k ? expf(logit_of_order_key(my_key) - max_logit) / sum : 0.0f;
  float picked_sum = 0.0f;
#pragma unroll
  for (int j = 0; j < kGatingMaxK; ++j) {
    const float p = __shfl_sync(0xffffffffu, prob, j);
    if (j < k) picked_sum += p;
  }
  if (lane < k) {
    weights[lane] = renormalize ? prob / picked_sum : prob;
    ids[lane] = my_id;
  }
}

// Top-k gating of one token by one warp (TopkGatingParams): by the logits' order or by the probabilities'.
template <int kPerLane>
__device__ __forceinline__ void warp_topk_gating(const float* logits, int num_experts, int k,
                                                 bool renormalize, float* weights, int32_t* ids, bool redux,
                                                 bool by_logits) {
  if (by_logits)
    warp_topk_gating_by_logits<kPerLane>(logits, num_experts, k, renormalize, weights, ids, redux);
  else
    warp_topk_gating_by_probabilities<kPerLane>(logits, num_experts, k, renormalize, weights, ids, redux);
}

}  // namespace tpserve::kernels
