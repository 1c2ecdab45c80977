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

// The lane's experts, loaded from the token's [E] logits without a branch (every lane reads a valid address,
// so the loads issue back to back): slot_key[i] the order key of expert lane + 32 i (0 past the experts),
// and the same as a queue, largest key first: key[0] the lane's head, id[i] the expert of key[i]. Sorted by
// adjacent swaps of strictly smaller keys, which keep equal keys in index order.
template <int kPerLane>
__device__ __forceinline__ void load_lane_queue(const float* logits, int num_experts,
                                                uint32_t (&slot_key)[kPerLane], uint32_t (&key)[kPerLane],
                                                int (&id)[kPerLane]) {
  const int lane = threadIdx.x % kWarpSize;
  float x[kPerLane];
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) x[i] = logits[min(lane + i * kWarpSize, num_experts - 1)];
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    slot_key[i] = logit_order_key(x[i]) & (lane + i * kWarpSize < num_experts ? 0xffffffffu : 0u);
    key[i] = slot_key[i], id[i] = lane + i * kWarpSize;
  }
#pragma unroll
  for (int pass = 0; pass < kPerLane; ++pass)
#pragma unroll
    for (int i = pass % 2; i + 1 < kPerLane; i += 2)
      if (key[i + 1] > key[i]) {
        const uint32_t k = key[i];
        const int d = id[i];
        key[i] = key[i + 1], id[i] = id[i + 1];
        key[i + 1] = k, id[i + 1] = d;
      }
}

// Drops a queue's head where `drop`: the entries move up one, `last` fills the tail.
template <class T, int kPerLane>
__device__ __forceinline__ void drop_queue_head(T (&queue)[kPerLane], bool drop, T last) {
#pragma unroll
  for (int i = 0; i + 1 < kPerLane; ++i)
    if (drop) queue[i] = queue[i + 1];
  if (drop) queue[kPerLane - 1] = last;
}

// The k rounds, exact on every row: a round's largest head key (one reduction), the lanes holding it by a
// ballot, and where several do (equal logits) a second reduction for the smallest index. Lane j keeps pick
// j's key and expert. It loads the logits again rather than have the fast rounds keep the lane's keys live.
template <int kPerLane>
__device__ __forceinline__ void logit_rounds_exact(const float* logits, int num_experts, int k, bool redux,
                                                   uint32_t& my_key, int& my_id) {
  const int lane = threadIdx.x % kWarpSize;
  uint32_t slot_key[kPerLane], key[kPerLane];
  int id[kPerLane];
  load_lane_queue(logits, num_experts, slot_key, key, id);
#pragma unroll 1
  for (int j = 0; j < k; ++j) {
    const uint32_t top = warp_extreme_u32<true>(key[0], redux);
    const uint32_t holders = __ballot_sync(0xffffffffu, key[0] == top);
    int winner = __ffs(static_cast<int>(holders)) - 1;
    if ((holders & (holders - 1u)) != 0u)  // the same branch in every lane
      winner = static_cast<int>(warp_extreme_u32<false>(key[0] == top ? id[0] : UINT_MAX, redux) % kWarpSize);
    const int pick = __shfl_sync(0xffffffffu, id[0], winner);
    if (lane == j) my_key = top, my_id = pick;
    drop_queue_head(key, lane == winner, 0u);
    drop_queue_head(id, lane == winner, id[kPerLane - 1]);
  }
}

// As warp_topk_gating_by_probabilities (the same arguments), by the logits' order. Each lane's experts wait
// in a queue sorted by key (load_lane_queue), so that the warp's largest key is the largest of the lanes'
// heads. A round is that largest head by one reduction, and the lane whose head it is drops it: nothing
// else waits in the round's chain. Beside it, lane j keeps round j's holders (a ballot) and every lane the
// rounds it won, so that after the rounds lane j fetches its pick's expert from the queue of the lane that
// won round j. Where a round's key had several holders (equal logits), whose dropping raced, the rounds run
// again, exactly (logit_rounds_exact). The sum of the exponentials takes one butterfly step a round, so its
// shuffles wait beside the rounds' reductions. Every lane sums the picks'
// probabilities in pick order, as the CPU reference does.
template <int kPerLane>
__device__ __forceinline__ void warp_topk_gating_by_logits(const float* logits, int num_experts, int k,
                                                           bool renormalize, float* weights, int32_t* ids,
                                                           bool redux) {
  const int lane = threadIdx.x % kWarpSize;
  uint32_t slot_key[kPerLane], key[kPerLane];
  int id[kPerLane];
  load_lane_queue(logits, num_experts, slot_key, key, id);
  const uint32_t first = warp_extreme_u32<true>(key[0], redux);
  const float max_logit = logit_of_order_key(first);
  float sum = 0.0f;  // the lane's exponentials in slot order, then the warp's butterfly steps (as warp_sum)
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const float v = expf(logit_of_order_key(slot_key[i]) - max_logit);
    sum += slot_key[i] != 0u ? v : 0.0f;
  }
  // my_key, my_holders: round (lane)'s key and holders; won: bit j where this lane's head was round j's key.
  uint32_t my_key = first, my_holders = 0, won = 0;
  uint32_t top = first;
  // Round j's chain is its reduction, the holder's test and its drop; the rest waits beside the next round's
  // reduction, which is issued first. Round j also takes butterfly step j + 1 of the sum (offsets 16 .. 1).
#pragma unroll 1
  for (int j = 0; j < k; ++j) {
    const bool mine = key[0] == top;
    drop_queue_head(key, mine, 0u);
    const uint32_t next = warp_extreme_u32<true>(key[0], redux);  // round j + 1's key (unused after the last)
    const uint32_t holders = __ballot_sync(0xffffffffu, mine);
    const int step = j + 1;
    const float other = __shfl_xor_sync(0xffffffffu, sum, step <= 5 ? kWarpSize >> step : 0);
    if (lane == j) my_key = top, my_holders = holders;
    won |= mine ? 1u << j : 0u;
    if (step <= 5) sum += other;
    top = next;
  }
  for (int step = k + 1; step <= 5; ++step) sum += __shfl_xor_sync(0xffffffffu, sum, kWarpSize >> step);
  // Lane j's pick: entry `rank` of the winner's queue, rank = the rounds before j the winner won.
  const int winner = (__ffs(static_cast<int>(my_holders)) - 1) & (kWarpSize - 1);
  const int rank = __popc(__shfl_sync(0xffffffffu, won, winner) & ((1u << lane) - 1u));
  int my_id = 0;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const int e = __shfl_sync(0xffffffffu, id[i], winner);
    if (i == rank) my_id = e;
  }
  if (__any_sync(0xffffffffu, (my_holders & (my_holders - 1u)) != 0u))  // a round had several holders
    logit_rounds_exact<kPerLane>(logits, num_experts, k, redux, my_key, my_id);
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
