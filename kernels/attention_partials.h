// Split decode attention's context ranges (kernels/paged_attention.h), and its unmerged partial results as
// a consumer reads them (AttentionPartials): the staged GEMV after attention merges a one-token step's few
// ranges as it loads its activations, instead of attention's last block merging them before it.
#pragma once

#include <cmath>

#include "kernels/kernel_api.h"

namespace tpserve::kernels {

// The range length for a context of kv_len keys cut into at most `num_splits` ranges of a multiple of q =
// split_keys keys, of at least min_keys keys, and, with growth > 0, of at least sqrt(growth * kv_len) keys.
// Computed on the device from the sequence's actual length, so that a step planned (or captured in a graph)
// for the longest context still spreads a short context over several blocks: with 128 planned ranges and q =
// 32 a 160-key context runs as 5 ranges of 32 keys, not as one block walking all of it. The square-root floor
// balances the two halves of a long context's time: the ranges run in parallel (time ~ kv_len / ranges), but
// their merge takes longer the more there are (one block a group of kAttentionMergeGroup, one block the
// groups), so the best number of ranges grows more slowly than the context (measured: docs/PERF.md, eleventh
// session).
__host__ __device__ inline int attention_keys_per_split(int kv_len, int num_splits, int q, int growth,
                                                        int min_keys = 0) {
  int keys = (kv_len + num_splits - 1) / num_splits;
  keys = keys > min_keys ? keys : min_keys;
  if (growth > 0) {
    const int floor_keys = static_cast<int>(ceilf(sqrtf(static_cast<float>(growth) * kv_len)));
    keys = keys > floor_keys ? keys : floor_keys;
  }
  keys = (keys + q - 1) / q * q;
  return keys > q ? keys : q;  // never 0 (an empty context), which callers divide by
}

// The non-empty ranges of a context of kv_len keys (attention_keys_per_split's ranges).
__host__ __device__ inline int attention_active_ranges(int kv_len, int num_splits, int q, int growth,
                                                       int min_keys) {
  const int keys = attention_keys_per_split(kv_len, num_splits, q, growth, min_keys);
  return (kv_len + keys - 1) / keys;
}

// The most ranges a consumer merges (AttentionPartials::max_ranges).
inline constexpr int kAttentionPartialsMaxRanges = 4;
// The ranges of a group in the two-level merge (PagedAttentionParams::merge_one_level_max; kernels/
// paged_attention_parts.cuh finish_block): the group's last block merges them into the group's first range.
inline constexpr int kAttentionMergeGroup = 8;

// The partials a one-token step's context of `ranges` ranges leaves its consumer (AttentionPartials,
// PagedAttentionParams::defer_merge_max_ranges): its `count` partials `stride` ranges apart. 2..max_ranges
// ranges: the ranges themselves. More, with `groups` (PagedAttentionParams::defer_merge_groups): the merged
// partials of its groups of kAttentionMergeGroup ranges, where it has 2..max_ranges groups. Otherwise count
// 0: attention merges them all and writes the rows.
struct DeferredPartials {
  int count = 0, stride = 1;
};
__host__ __device__ inline DeferredPartials attention_deferred_partials(int ranges, int max_ranges,
                                                                        bool groups) {
  if (ranges >= 2 && ranges <= max_ranges) return {ranges, 1};
  const int group_count = (ranges + kAttentionMergeGroup - 1) / kAttentionMergeGroup;
  if (groups && ranges > max_ranges && group_count >= 2 && group_count <= max_ranges)
    return {group_count, kAttentionMergeGroup};
  return {};
}

// A one-token decode step's attention output left unmerged (PagedAttentionParams::defer_merge_max_ranges):
// where the token's context has 2..max_ranges ranges, its rows are the ranges' partials, which the consumer
// merges as the tile's last block would have (the same arithmetic: kernels/paged_attention_parts.cuh
// merge_ranges); with one range or more than max_ranges, attention wrote the rows and the consumer reads
// them.
struct AttentionPartials {
  const float* out = nullptr;      // [H, num_splits, D] unnormalised sums (nullptr: none to merge)
  const float* max_sum = nullptr;  // [H, num_splits, 2] max (log2 units), sum of exp2
  const int32_t* positions =
      nullptr;       // [1] the step's one token's (query_start[0] = 0): context position + 1
  int heads = 0;     // H: the rows' length is H * head_dim
  int head_dim = 0;  // D, a multiple of 4
  int num_splits = 0, split_keys = 0, split_growth = 0, split_min_keys = 0;  // the attention launch's
  int max_ranges = 0;                                                        // 2..kAttentionPartialsMaxRanges
  bool groups = false;  // PagedAttentionParams::defer_merge_groups: attention_deferred_partials
};

}  // namespace tpserve::kernels
