// One attention head's RMSNorm + RoPE (neox half split) by one warp, shared by the q/k norm kernel
// (kernels/qk_norm_rope_kv.cu) and the decode attention kernel that folds it in (kernels/
// paged_attention_mma.cu), so both give the same bits. Lane l holds elements [l * E, l * E + E) of the head's
// first half and the same of its second half (E = ceil(D / 64)), so each RoPE pair (i, i + D/2) sits in one
// lane. fp32 math with explicit roundings (no contraction left to the compiler, which could differ between
// the two kernels), one warp reduction for the norm.
#pragma once

#include "kernels/device_common.cuh"
#include "kernels/qk_norm_rope_kv.h"

namespace tpserve::kernels {

inline constexpr int kRopeMaxPerLane = kRopeMaxHeadDim / 2 / kWarpSize;

// This lane's norm weights and rotation for one head at one position.
struct HeadRope {
  float w1[kRopeMaxPerLane], w2[kRopeMaxPerLane], sn[kRopeMaxPerLane], cs[kRopeMaxPerLane];
};

__device__ __forceinline__ int rope_per_lane(int d) {
  return (d / 2 + kWarpSize - 1) / kWarpSize;  // lanes past the half hold nothing
}

// The position-free half of load_head_rope: norm weights w [D] into r.w1 / r.w2 and the inverse frequencies
// into r.cs, so that these loads can go out before the loads the position comes from.
template <typename InvFreq>
__device__ __forceinline__ void load_head_rope_weights(HeadRope& r, const bf16* w, InvFreq inv_freq, int d) {
  const int lane = threadIdx.x % kWarpSize, half = d / 2, per_lane = rope_per_lane(d);
#pragma unroll
  for (int e = 0; e < kRopeMaxPerLane; ++e) {
    const int i = lane * per_lane + e;
    if (e >= per_lane || i >= half) break;
    r.w1[e] = __bfloat162float(w[i]);
    r.w2[e] = __bfloat162float(w[i + half]);
    r.cs[e] = inv_freq(i);
  }
}

// The other half: the rotation at `position` from the inverse frequencies load_head_rope_weights left in
// r.cs.
__device__ __forceinline__ void rotate_head_rope(HeadRope& r, float position, int d) {
  const int lane = threadIdx.x % kWarpSize, half = d / 2, per_lane = rope_per_lane(d);
#pragma unroll
  for (int e = 0; e < kRopeMaxPerLane; ++e) {
    const int i = lane * per_lane + e;
    if (e >= per_lane || i >= half) break;
    sincosf(__fmul_rn(position, r.cs[e]), &r.sn[e], &r.cs[e]);
  }
}

// Fills r for norm weights w [D] at `position`; inv_freq(i) = 1 / theta^(2i / D).
template <typename InvFreq>
__device__ __forceinline__ void load_head_rope(HeadRope& r, const bf16* w, float position, InvFreq inv_freq,
                                               int d) {
  load_head_rope_weights(r, w, inv_freq, d);
  rotate_head_rope(r, position, d);
}

// dst = rope(w * src / sqrt(mean(src^2) + eps)), bf16 [D] each; warp-collective. Each lane writes only the
// elements it read, so dst may be src.
__device__ __forceinline__ void norm_rope_head(const HeadRope& r, const bf16* src, bf16* dst, int d,
                                               float eps) {
  const int lane = threadIdx.x % kWarpSize, half = d / 2, per_lane = rope_per_lane(d);
  float x1[kRopeMaxPerLane], x2[kRopeMaxPerLane];
  float sum_sq = 0.0f;
#pragma unroll
  for (int e = 0; e < kRopeMaxPerLane; ++e) {
    const int i = lane * per_lane + e;
    if (e >= per_lane || i >= half) break;
    x1[e] = __bfloat162float(src[i]);
    x2[e] = __bfloat162float(src[i + half]);
    sum_sq = __fmaf_rn(x1[e], x1[e], sum_sq);
    sum_sq = __fmaf_rn(x2[e], x2[e], sum_sq);
  }
  sum_sq = warp_sum(sum_sq);
  const float inv = 1.0f / sqrtf(sum_sq / static_cast<float>(d) + eps);
#pragma unroll
  for (int e = 0; e < kRopeMaxPerLane; ++e) {
    const int i = lane * per_lane + e;
    if (e >= per_lane || i >= half) break;
    const float y1 = __fmul_rn(r.w1[e], __fmul_rn(x1[e], inv));
    const float y2 = __fmul_rn(r.w2[e], __fmul_rn(x2[e], inv));
    dst[i] = __float2bfloat16(__fmaf_rn(y1, r.cs[e], -__fmul_rn(y2, r.sn[e])));
    dst[i + half] = __float2bfloat16(__fmaf_rn(y2, r.cs[e], __fmul_rn(y1, r.sn[e])));
  }
}

// dst = src, bf16 [D], in the same lane layout (a v head).
__device__ __forceinline__ void copy_head(const bf16* src, bf16* dst, int d) {
  const int lane = threadIdx.x % kWarpSize, half = d / 2, per_lane = rope_per_lane(d);
#pragma unroll
  for (int e = 0; e < kRopeMaxPerLane; ++e) {
    const int i = lane * per_lane + e;
    if (e >= per_lane || i >= half) break;
    dst[i] = src[i];
    dst[i + half] = src[i + half];
  }
}

}  // namespace tpserve::kernels
