// The MoE combine of one 8-column piece of one token (kernels/moe_combine.h), shared by moe_combine_kernel
// and the RMSNorm kernel that takes its x from the combine (RmsNormParams::combine), so that both sum alike.
#pragma once

#include "kernels/device_common.cuh"
#include "kernels/moe_combine.h"

namespace tpserve::kernels {

// sum[0..8) = sum over the token's slots j, in order, of weight[token, j] * y[source, col .. col + 8), slots
// of experts held elsewhere (and slots moe_pack could not place) skipped.
__device__ __forceinline__ void combine_piece(const MoeCombineParams& p, int token, int col,
                                              float (&sum)[kBf16PerVec]) {
#pragma unroll
  for (int i = 0; i < kBf16PerVec; ++i) sum[i] = 0.0f;
  for (int j = 0; j < p.k; ++j) {
    const int64_t slot = static_cast<int64_t>(token) * p.k + j;
    if (p.topk_ids != nullptr) {
      const int e = p.topk_ids[slot] - p.expert_begin;
      if (e < 0 || e >= p.num_experts) continue;
    }
    const int64_t row = p.origin != nullptr ? p.origin[slot] : slot;
    if (row < 0) continue;  // a slot moe_pack could not place
    const int64_t at = row * p.hidden + col;
    float y[kBf16PerVec];
    if (p.y_f32 != nullptr) {
      const float4 lo = *reinterpret_cast<const float4*>(p.y_f32 + at);
      const float4 hi = *reinterpret_cast<const float4*>(p.y_f32 + at + 4);
      y[0] = lo.x, y[1] = lo.y, y[2] = lo.z, y[3] = lo.w, y[4] = hi.x, y[5] = hi.y, y[6] = hi.z, y[7] = hi.w;
    } else {
      unpack_bf16x8(load_vec(p.y_bf16 + at), y);
    }
    const float w = p.weights[slot];
#pragma unroll
    for (int i = 0; i < kBf16PerVec; ++i) sum[i] += w * y[i];
  }
}

}  // namespace tpserve::kernels
