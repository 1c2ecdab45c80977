// The consumer's merge of a one-token step's unmerged attention ranges (AttentionPartials,
// kernels/attention_partials.h).
#pragma once

#include "kernels/attention_partials.h"
#include "kernels/device_common.cuh"

namespace tpserve::kernels {

// The partials the consumer merges (count 0: none, attention wrote the rows; attention_deferred_partials).
// Reads the token's position: call it before the PDL wait only where the launch before does not write it.
__device__ __forceinline__ DeferredPartials attention_partials_to_merge(const AttentionPartials& a) {
  const int ranges = attention_active_ranges(a.positions[0] + 1, a.num_splits, a.split_keys, a.split_growth,
                                             a.split_min_keys);
  return attention_deferred_partials(ranges, a.max_ranges, a.groups);
}

// dst[0 .. heads * head_dim) = the rows merged from the `m.count` partials m.stride ranges apart (bf16),
// items of 4 dims over the block's threads, with the arithmetic of the tile's last block
// (kernels/paged_attention_parts.cuh merge_ranges, one chunk): the max over the partials, then in order each
// one's weight exp2(max_r - max) times its sums and its sum of exp2; the sums scaled by 1 / that sum. The
// same bits. Partials are read past L1.
__device__ void merge_attention_partials(const AttentionPartials& a, DeferredPartials m, bf16* dst) {
  const int ranges = m.count;
  const int items_per_head = a.head_dim / 4, items = a.heads * items_per_head;
  for (int item = threadIdx.x; item < items; item += blockDim.x) {
    const int h = item / items_per_head, d = (item % items_per_head) * 4;
    const float* max_sum = a.max_sum + static_cast<int64_t>(h) * a.num_splits * 2;
    const float* part = a.out + static_cast<int64_t>(h) * a.num_splits * a.head_dim + d;
    float2 ms[kAttentionPartialsMaxRanges];
    float4 o[kAttentionPartialsMaxRanges];
#pragma unroll
    for (int r = 0; r < kAttentionPartialsMaxRanges; ++r) {
      if (r >= ranges) break;
      ms[r] = __ldcg(reinterpret_cast<const float2*>(max_sum + r * m.stride * 2));
      o[r] = __ldcg(reinterpret_cast<const float4*>(part + static_cast<int64_t>(r) * m.stride * a.head_dim));
    }
    float max_all = -INFINITY;
#pragma unroll
    for (int r = 0; r < kAttentionPartialsMaxRanges; ++r)
      if (r < ranges) max_all = fmaxf(max_all, ms[r].x);
    float num[4] = {0.0f, 0.0f, 0.0f, 0.0f}, den = 0.0f;
#pragma unroll
    for (int r = 0; r < kAttentionPartialsMaxRanges; ++r) {
      if (r >= ranges) break;
      const float w = exp2f(ms[r].x - max_all);
      num[0] += w * o[r].x, num[1] += w * o[r].y, num[2] += w * o[r].z, num[3] += w * o[r].w;
      den += w * ms[r].y;
    }
    const float inv = 1.0f / den;
    *reinterpret_cast<uint2*>(dst + h * a.head_dim + d) =
        make_uint2(pack_bf16x2(num[0] * inv, num[1] * inv), pack_bf16x2(num[2] * inv, num[3] * inv));
  }
}

}  // namespace tpserve::kernels
