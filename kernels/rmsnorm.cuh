// The per-piece steps of add + RMSNorm (kernels/rmsnorm.h), shared by rmsnorm_kernel and the one-shot
// all-reduce's fused epilogue (kernels/one_shot_all_reduce.cu), so that both give the same bits.
#pragma once

#include "kernels/device_common.cuh"

namespace tpserve::kernels {

// v += the residual piece (8 bf16, loaded), the sum rounded to bf16: v becomes the rounded values, which are
// what the norm sees; returns them packed, as the residual stores them.
__device__ __forceinline__ uint4 add_residual(uint4 residual, float (&v)[kBf16PerVec]) {
  float r[kBf16PerVec];
  unpack_bf16x8(residual, r);
#pragma unroll
  for (int j = 0; j < kBf16PerVec; ++j) r[j] += v[j];
  const uint4 packed = pack_bf16x8(r);
  unpack_bf16x8(packed, v);
  return packed;
}

// residual[0..8) += v, stored in bf16; v becomes the stored (rounded) values.
__device__ __forceinline__ void add_residual_piece(bf16* residual, float (&v)[kBf16PerVec]) {
  store_vec(residual, add_residual(load_vec(residual), v));
}

// out[0..8) = weight * (v * inv), inv = 1 / sqrt(mean(x^2) + eps) of the row; weight: 8 bf16, loaded.
__device__ __forceinline__ void store_normed_piece(uint4 weight, const float (&v)[kBf16PerVec], float inv,
                                                   bf16* out) {
  float w[kBf16PerVec], y[kBf16PerVec];
  unpack_bf16x8(weight, w);
#pragma unroll
  for (int j = 0; j < kBf16PerVec; ++j) y[j] = w[j] * (v[j] * inv);
  store_vec(out, pack_bf16x8(y));
}

__device__ __forceinline__ void store_normed_piece(const bf16* weight, const float (&v)[kBf16PerVec],
                                                   float inv, bf16* out) {
  store_normed_piece(load_vec(weight), v, inv, out);
}

}  // namespace tpserve::kernels
