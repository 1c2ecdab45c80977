// The MoE combine of one 8-column piece of one token (kernels/moe_combine.h), shared by moe_combine_kernel
// and the RMSNorm kernel that takes its x from the combine (RmsNormParams::combine), so that both sum alike.
#pragma once

#include "kernels/device_common.cuh"
#include "kernels/moe_combine.h"

namespace tpserve::kernels {

// y[at .. at + 8) of the expert outputs as floats.
__device__ __forceinline__ void load_expert_row(const MoeCombineParams& p, int64_t at,
                                                float (&y)[kBf16PerVec]) {
  if (p.y_f32 != nullptr) {
    const float4 lo = *reinterpret_cast<const float4*>(p.y_f32 + at);
    const float4 hi = *reinterpret_cast<const float4*>(p.y_f32 + at + 4);
    y[0] = lo.x, y[1] = lo.y, y[2] = lo.z, y[3] = lo.w, y[4] = hi.x, y[5] = hi.y, y[6] = hi.z, y[7] = hi.w;
  } else {
    unpack_bf16x8(load_vec(p.y_bf16 + at), y);
  }
}

// Slots whose loads combine_piece issues together: their ids first, then their rows, then the sums, so that
// a token's k = 8 slots cost two dependent trips to memory instead of two per slot.
inline constexpr int kCombineSlotsAtOnce = 8;

// The routing of slots j0 .. j0 + kCombineSlotsAtOnce - 1 of a token: row[u], the source row of slot j0 + u,
// or -1 where the slot adds nothing (past k, an expert held elsewhere, a slot moe_pack could not place), and
// its weight w[u].
struct CombineSlots {
  int64_t row[kCombineSlotsAtOnce];
  float w[kCombineSlotsAtOnce];
};

__device__ __forceinline__ void load_combine_slots(const MoeCombineParams& p, int token, int j0,
                                                   CombineSlots& s) {
#pragma unroll
  for (int u = 0; u < kCombineSlotsAtOnce; ++u) {
    const int j = j0 + u;
    s.row[u] = -1;
    s.w[u] = 0.0f;
    if (j >= p.k) continue;
    const int64_t slot = static_cast<int64_t>(token) * p.k + j;
    if (p.topk_ids != nullptr) {
      const int e = p.topk_ids[slot] - p.expert_begin;
      if (e < 0 || e >= p.num_experts) continue;
    }
    s.row[u] = p.origin != nullptr ? p.origin[slot] : slot;  // origin < 0: a slot moe_pack could not place
    s.w[u] = p.weights[slot];
  }
}

// sum[0..8) += the slots' weighted rows y[row, col .. col + 8), in slot order: their loads issued together.
__device__ __forceinline__ void add_combine_slots(const MoeCombineParams& p, const CombineSlots& s, int col,
                                                  float (&sum)[kBf16PerVec]) {
  float y[kCombineSlotsAtOnce][kBf16PerVec];
#pragma unroll
  for (int u = 0; u < kCombineSlotsAtOnce; ++u)
    if (s.row[u] >= 0) load_expert_row(p, s.row[u] * p.hidden + col, y[u]);
#pragma unroll
  for (int u = 0; u < kCombineSlotsAtOnce; ++u) {
    if (s.row[u] < 0) continue;
#pragma unroll
    for (int i = 0; i < kBf16PerVec; ++i) sum[i] += s.w[u] * y[u][i];
  }
}

// sum[0..8) = sum over the token's slots j, in order, of weight[token, j] * y[source, col .. col + 8), slots
// of experts held elsewhere (and slots moe_pack could not place) skipped.
__device__ __forceinline__ void combine_piece(const MoeCombineParams& p, int token, int col,
                                              float (&sum)[kBf16PerVec]) {
#pragma unroll
  for (int i = 0; i < kBf16PerVec; ++i) sum[i] = 0.0f;
  if (p.one_slot_at_a_time) {
    for (int j = 0; j < p.k; ++j) {
      const int64_t slot = static_cast<int64_t>(token) * p.k + j;
      if (p.topk_ids != nullptr) {
        const int e = p.topk_ids[slot] - p.expert_begin;
        if (e < 0 || e >= p.num_experts) continue;
      }
      const int64_t row = p.origin != nullptr ? p.origin[slot] : slot;
      if (row < 0) continue;
      float y[kBf16PerVec];
      load_expert_row(p, row * p.hidden + col, y);
      const float w = p.weights[slot];
#pragma unroll
      for (int i = 0; i < kBf16PerVec; ++i) sum[i] += w * y[i];
    }
    return;
  }
  for (int j0 = 0; j0 < p.k; j0 += kCombineSlotsAtOnce) {
    CombineSlots s;
    load_combine_slots(p, token, j0, s);
    add_combine_slots(p, s, col, sum);
  }
}

}  // namespace tpserve::kernels
