// Pieces of the paged attention kernels (kernels/paged_attention.cu on CUDA cores, kernels/
// paged_attention_mma.cu on tensor cores): the block's place and key range, the K/V tile copies, and the end
// of a block: the rows written directly, or the split partials and their merge by the tile's last block.
#pragma once

#include <type_traits>

#include "kernels/device_common.cuh"
#include "kernels/paged_attention.h"

namespace tpserve::kernels::attention {

inline constexpr int kThreads = 128;
inline constexpr int kWarps = kThreads / kWarpSize;
inline constexpr float kLog2e = 1.4426950408889634f;

// Work split of a block of kThreads over kRows query rows and D dims, tiles of kKeys keys:
//   scores: thread (key, row group); softmax: one warp per row; P.V and the block's end: thread (4 dims,
//   row group), kPvRowsPerThread rows each.
template <int D, int kRows, int kKeys>
struct Tile {
  static constexpr int kDim = D;
  static constexpr int kRowStride = D + 8;  // bf16 per shared K/V row: 16 bytes of padding
  static constexpr int kChunksPerRow = D / kBf16PerVec;
  static constexpr int kQkRowGroups = kThreads / kKeys;
  static constexpr int kQkRowsPerThread = kRows / kQkRowGroups;
  static constexpr int kDimGroups = D / 4;
  static constexpr int kPvRowGroups = kThreads / kDimGroups;
  static constexpr int kPvRowsPerThread = kRows / kPvRowGroups;
  static constexpr int kSoftmaxRowsPerWarp = kRows / kWarps;
  static constexpr int kKeysPerLane = kKeys / kWarpSize;
  static_assert(kRows % kPvRowGroups == 0 && kRows % kWarps == 0);
};

// The block's place: (query-row tile, sequence, KV head [, context split]) from its indices, its rows (the
// tile's tokens x the group) and its key range [key_begin, key_end) of the tile's context.
struct BlockTile {
  int seq = 0, kv_head = 0, tile = 0, split = 0, group = 0, q_begin = 0, t0 = 0, rows = 0;
  int kv_len = 0, key_begin = 0, key_end = 0;
  int active_splits = 1;  // non-empty ranges of the tile: splits 0 .. active_splits - 1
  __device__ int token_of(int r) const { return q_begin + t0 + r / group; }
  __device__ int head_of(int r) const { return kv_head * group + r % group; }
  __device__ int64_t row_index(const PagedAttentionParams& p, int r) const {
    return static_cast<int64_t>(token_of(r)) * p.num_q_heads + head_of(r);
  }
};

// Calls f(std::integral_constant<int, D>{}) for the head dim the kernels are built for: 32, 64, else 128
// (the backend checks head_dim).
template <typename F>
void with_head_dim(int head_dim, F&& f) {
  if (head_dim == 32)
    f(std::integral_constant<int, 32>{});
  else if (head_dim == 64)
    f(std::integral_constant<int, 64>{});
  else
    f(std::integral_constant<int, 128>{});
}

// Fills b and limit_s (each row's causal key limit; 0 past the rows). False where the block has nothing to
// do (its tokens or its range past the tile's): the whole block returns then. With first_slot, the folded
// prologue's slot of the tile's first token is read into it beside the positions (one trip to memory).
template <int kRows, bool kSplit>
__device__ bool begin_block(const PagedAttentionParams& p, BlockTile& b, int* limit_s,
                            int* first_slot = nullptr) {
  const int tid = threadIdx.x;
  const AttentionBlockPlace at =
      attention_block_place(blockIdx.x, blockIdx.y, blockIdx.z, gridDim.x, gridDim.y, gridDim.z, p.num_splits,
                            kSplit && p.ranges_outermost);
  b.tile = at.tile, b.seq = at.seq, b.kv_head = at.kv_head, b.split = at.split;
  b.group = p.num_q_heads / p.num_kv_heads;
  const int tokens_per_block = kRows / b.group;
  b.q_begin = p.query_start[b.seq];
  const int q_len = p.query_start[b.seq + 1] - b.q_begin;
  b.t0 = b.tile * tokens_per_block;
  if (b.t0 >= q_len) return false;
  if (first_slot != nullptr) *first_slot = p.prologue.slot_mapping[b.q_begin + b.t0];
  b.rows = min(tokens_per_block, q_len - b.t0) * b.group;
  if (tid < kRows) limit_s[tid] = tid < b.rows ? p.positions[b.token_of(tid)] + 1 : 0;
  __syncthreads();
  b.kv_len = 0;
  for (int r = 0; r < b.rows; r += b.group) b.kv_len = max(b.kv_len, limit_s[r]);
  const int per_split =
      attention_keys_per_split(b.kv_len, p.num_splits, p.split_keys, p.split_growth, p.split_min_keys);
  b.key_begin = b.split * per_split;
  b.key_end = min(b.kv_len, b.key_begin + per_split);
  if (b.key_begin >= b.key_end) return false;  // past the context: not one of the tile's active splits
  b.active_splits = kSplit ? (b.kv_len + per_split - 1) / per_split : 1;
  return true;
}

// Issues the cp.async copies of keys [kt, kt + kKeys) of the block's KV head into k_s / v_s ([kKeys][D +
// 8]; keys at or past key_end zero-filled), as one commit group. Each thread copies the same 16 bytes of
// every kKeyStep-th key, and steps its (cache block, offset in it) from key to key: one division a tile
// rather than one a copy (the copies' address arithmetic is much of the instruction stream at long
// contexts, where each block streams many tiles on few warps).
template <int D, int kKeys>
__device__ __forceinline__ void load_kv_tile(const PagedAttentionParams& p, const BlockTile& b, int kt,
                                             bf16 (*k_s)[D + 8], bf16 (*v_s)[D + 8]) {
  constexpr int kChunksPerRow = D / kBf16PerVec;
  static_assert(kThreads % kChunksPerRow == 0 && kKeys % (kThreads / kChunksPerRow) == 0);
  constexpr int kKeyStep = kThreads / kChunksPerRow;
  const int32_t* table = p.block_tables + static_cast<int64_t>(b.seq) * p.max_blocks_per_seq;
  const int first_key = threadIdx.x / kChunksPerRow, d0 = (threadIdx.x % kChunksPerRow) * kBf16PerVec;
  const int64_t key_stride = static_cast<int64_t>(p.num_kv_heads) * D;  // elements between cache rows
  const bf16* k_src = p.k_cache + b.kv_head * D + d0;
  const bf16* v_src = p.v_cache + b.kv_head * D + d0;
  int block = (kt + first_key) / p.block_size, in_block = kt + first_key - block * p.block_size;
#pragma unroll 4
  for (int key = first_key; key < kKeys; key += kKeyStep) {
    const bool valid = kt + key < b.key_end;
    const int64_t offset =
        valid ? (static_cast<int64_t>(table[block]) * p.block_size + in_block) * key_stride : 0;
    cp_async_16(&k_s[key][d0], k_src + offset, valid);
    cp_async_16(&v_s[key][d0], v_src + offset, valid);
    in_block += kKeyStep;
    while (in_block >= p.block_size) in_block -= p.block_size, ++block;
  }
  cp_async_commit();
}

// v = the N floats at src (16-byte aligned for N >= 4, 8-byte for N = 2), read past L1 (__ldcg).
template <int N>
__device__ __forceinline__ void load_floats_cg(float (&v)[N], const float* src) {
  if constexpr (N == 2) {
    const float2 t = __ldcg(reinterpret_cast<const float2*>(src));
    v[0] = t.x, v[1] = t.y;
  } else {
    static_assert(N % 4 == 0);
#pragma unroll
    for (int i = 0; i < N / 4; ++i) {
      const float4 t = __ldcg(reinterpret_cast<const float4*>(src) + i);
      v[4 * i] = t.x, v[4 * i + 1] = t.y, v[4 * i + 2] = t.z, v[4 * i + 3] = t.w;
    }
  }
}

// dst[0 .. N) = bf16(v * scale), one store (dst aligned to 2N bytes; N = 2, 4 or 8).
template <int N>
__device__ __forceinline__ void store_bf16_row(bf16* dst, const float (&v)[N], float scale) {
  uint32_t packed[N / 2];
#pragma unroll
  for (int i = 0; i < N / 2; ++i) packed[i] = pack_bf16x2(v[2 * i] * scale, v[2 * i + 1] * scale);
  if constexpr (N == 2)
    *reinterpret_cast<uint32_t*>(dst) = packed[0];
  else if constexpr (N == 4)
    *reinterpret_cast<uint2*>(dst) = make_uint2(packed[0], packed[1]);
  else
    *reinterpret_cast<uint4*>(dst) = make_uint4(packed[0], packed[1], packed[2], packed[3]);
}

// Counts a block's arrival at `counter`, which `expected` blocks reach; true in every thread of the block
// that arrives last. Thread 0's fence after the barrier orders the whole block's stores before its count (as
// cooperative groups' grid sync does); the last block sees expected - 1 earlier arrivals, so no other block
// of this launch touches the counter again and it resets it to 0 for the next launch or graph replay. (A
// launch cannot stop part-way in a step: no recovery of a counter left non-zero.) With acq_rel
// (PagedAttentionParams::arrival_acq_rel) the count is one atom.acq_rel.gpu instead: its release half orders
// the block's stores, which the barrier put before it, ahead of the count (release is cumulative in the
// PTX memory model), and its acquire half the last block's reads after the other counts, which the second
// barrier extends to all its threads.
__device__ __forceinline__ bool arrive_last(int* counter, int expected, bool& last_s, bool acq_rel) {
  __syncthreads();
  if (threadIdx.x == 0) {
    int before;
    if (acq_rel) {
      asm volatile("atom.acq_rel.gpu.global.add.s32 %0, [%1], %2;"
                   : "=r"(before)
                   : "l"(counter), "r"(1)
                   : "memory");
    } else {
      __threadfence();
      before = atomicAdd(counter, 1);
    }
    const bool last = before == expected - 1;
    if (last) atomicExch(counter, 0);
    if (!acq_rel) __threadfence();  // the earlier arrivals' stores are read after their counts were seen
    last_s = last;
  }
  __syncthreads();
  return last_s;
}

// Merges the partials of ranges first, first + stride, .. (count of them) of the block's tile, the same math
// for every choice of merging block. Items of (row, D / 16 dims) spread over the threads (for D = 128 and a
// group of 8 each thread holds one, so one chunk's loads cover every row; with 16 rows a thread takes its
// two items one after the other). Over the ranges in order,
// kChunk at a time, an online max: each chunk's loads all go out before its adds (indices clamped: no branch
// around a load), then num and den are rescaled to the chunk's max. A range past a row's own position has
// max -inf and weight 0 (a row can have no key in a whole group of ranges: max -inf, sum 0). Partials are
// read with L1-bypassing loads: L1 is not coherent with the other blocks' stores. to_out: the rows are
// normalised into out; else the merged (unnormalised) partial replaces range `first`'s, after a barrier (the
// block's threads read that range's max and sum before any writes them).
template <int D>
__device__ void merge_ranges(const PagedAttentionParams& p, const BlockTile& b, int first, int count,
                             int stride, bool to_out) {
  constexpr int kMergeDims = D / 16, kItemsPerRow = D / kMergeDims, kChunk = 8;
  static_assert(
      kAttentionPartialsMaxRanges <= kChunk,
      "a consumer's merge (kernels/attention_partials.cuh) is this merge's one chunk: the same bits");
  // Items a thread takes, at most (a tile has at most kAttentionMaxGroup rows).
  constexpr int kItems = (kAttentionMaxGroup * kItemsPerRow + kThreads - 1) / kThreads;
  float max_all[kItems], den[kItems], num[kItems][kMergeDims];
#pragma unroll
  for (int k = 0; k < kItems; ++k) {
    max_all[k] = -INFINITY, den[k] = 0.0f;
#pragma unroll
    for (int d = 0; d < kMergeDims; ++d) num[k][d] = 0.0f;
    const int item = threadIdx.x + k * kThreads;
    if (item >= b.rows * kItemsPerRow) continue;
    const int r = item / kItemsPerRow, dm = (item % kItemsPerRow) * kMergeDims;
    const float* max_sum = p.partial_max_sum + b.row_index(p, r) * p.num_splits * 2;
    const float* part = p.partial_out + b.row_index(p, r) * p.num_splits * D + dm;
    for (int s0 = 0; s0 < count; s0 += kChunk) {
      float2 ms[kChunk];
      float o[kChunk][kMergeDims];
#pragma unroll
      for (int j = 0; j < kChunk; ++j) {
        const int s = first + min(s0 + j, count - 1) * stride;
        ms[j] = __ldcg(reinterpret_cast<const float2*>(max_sum + s * 2));
        load_floats_cg(o[j], part + s * D);
      }
      float chunk_max = max_all[k];
#pragma unroll
      for (int j = 0; j < kChunk; ++j) chunk_max = fmaxf(chunk_max, ms[j].x);  // clamped repeats: no change
      if (chunk_max == -INFINITY) continue;                 // no key of the row in these ranges yet
      const float rescale = exp2f(max_all[k] - chunk_max);  // 0 while max_all is -inf (num and den are 0)
      den[k] *= rescale;
#pragma unroll
      for (int d = 0; d < kMergeDims; ++d) num[k][d] *= rescale;
#pragma unroll
      for (int j = 0; j < kChunk; ++j) {
        if (s0 + j >= count) break;
        const float w = exp2f(ms[j].x - chunk_max);  // exp2(-inf) = 0
#pragma unroll
        for (int d = 0; d < kMergeDims; ++d) num[k][d] += w * o[j][d];
        den[k] += w * ms[j].y;
      }
      max_all[k] = chunk_max;
    }
  }
  if (!to_out) __syncthreads();
#pragma unroll
  for (int k = 0; k < kItems; ++k) {
    const int item = threadIdx.x + k * kThreads;
    if (item >= b.rows * kItemsPerRow) break;
    const int r = item / kItemsPerRow, dm = (item % kItemsPerRow) * kMergeDims;
    if (to_out) {
      store_bf16_row(p.out + b.row_index(p, r) * D + dm, num[k], 1.0f / den[k]);
    } else {
      const int64_t slot = b.row_index(p, r) * p.num_splits + first;
      float* dst = p.partial_out + slot * D + dm;
#pragma unroll
      for (int d = 0; d < kMergeDims; ++d) dst[d] = num[k][d];
      if (dm == 0) *reinterpret_cast<float2*>(p.partial_max_sum + slot * 2) = make_float2(max_all[k], den[k]);
    }
  }
}

// Each of this thread's rows' max and sum (rows pv_row_group + i * kPvRowGroups, pv_row_group = tid /
// kDimGroups, as finish_block takes them) from the block's shared max_s / sum_s.
template <typename T>
__device__ __forceinline__ void load_row_stats(const float* max_s, const float* sum_s, int pv_row_group,
                                               float (&row_max)[T::kPvRowsPerThread],
                                               float (&row_sum)[T::kPvRowsPerThread]) {
#pragma unroll
  for (int i = 0; i < T::kPvRowsPerThread; ++i) {
    const int r = pv_row_group + i * T::kPvRowGroups;
    row_max[i] = max_s[r], row_sum[i] = sum_s[r];
  }
}

// The block's end. acc[i][0..3]: the unnormalised output of row pv_row_group + i * kPvRowGroups, dims
// dim_group * 4 .. + 3 (thread (dim_group, pv_row_group) = (tid % kDimGroups, tid / kDimGroups)); row_max[i]
// / row_sum[i]: that row's running max (log2 units) and sum of exp2. One range: the rows are written.
// Several: the block writes its unnormalised partials and counts its arrival, and the tile's last block to
// arrive merges them all (no separate reduce launch), unless p.defer_merge_max_ranges leaves that to the
// next launch (kernels/attention_partials.h). More than p.merge_one_level_max ranges
// (runtime.attention_merge_one_level_max, default 16): in two levels, so that no one block reads them all:
// the last block of each group of kAttentionMergeGroup consecutive ranges merges the group into the group's
// first range, and the last of those merges the groups (or, with p.defer_merge_groups, the next launch
// does, at any count of ranges above p.defer_merge_max_ranges that makes 2..that many groups).
// Returns true in the block that merged the tile's ranges into its rows (every thread of it).
template <typename T, bool kSplit>
__device__ bool finish_block(const PagedAttentionParams& p, const BlockTile& b,
                             const float (&acc)[T::kPvRowsPerThread][4],
                             const float (&row_max)[T::kPvRowsPerThread],
                             const float (&row_sum)[T::kPvRowsPerThread]) {
  constexpr int D = T::kDim;
  __shared__ bool last_s;  // arrive_last's answer, for every thread of the block
  const int tid = threadIdx.x;
  const int dim_group = tid % T::kDimGroups, pv_row_group = tid / T::kDimGroups;
  const int d0 = dim_group * 4;
  if (b.active_splits == 1) {
#pragma unroll
    for (int i = 0; i < T::kPvRowsPerThread; ++i) {
      const int r = pv_row_group + i * T::kPvRowGroups;
      if (r >= b.rows) break;
      const float inv = 1.0f / row_sum[i];
      *reinterpret_cast<uint2*>(p.out + b.row_index(p, r) * D + d0) = make_uint2(
          pack_bf16x2(acc[i][0] * inv, acc[i][1] * inv), pack_bf16x2(acc[i][2] * inv, acc[i][3] * inv));
    }
    return false;
  }
  if constexpr (kSplit) {
#pragma unroll
    for (int i = 0; i < T::kPvRowsPerThread; ++i) {
      const int r = pv_row_group + i * T::kPvRowGroups;
      if (r >= b.rows) break;
      const int64_t part = b.row_index(p, r) * p.num_splits + b.split;
      *reinterpret_cast<float4*>(p.partial_out + part * D + d0) =
          make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
      if (dim_group == 0)
        *reinterpret_cast<float2*>(p.partial_max_sum + part * 2) = make_float2(row_max[i], row_sum[i]);
    }
    static_assert(T::kPvRowGroups * T::kPvRowsPerThread <= kAttentionMaxGroup,
                  "merge_ranges takes at most kAttentionMaxGroup rows a tile");
    // The next launch merges the ranges (stride 1) or the groups this launch merges
    // (attention_deferred_partials).
    const DeferredPartials deferred =
        attention_deferred_partials(b.active_splits, p.defer_merge_max_ranges, p.defer_merge_groups);
    if (deferred.count > 0 && deferred.stride == 1) return false;
    const bool defer_groups = deferred.count > 0;
    const int64_t tile_index =
        (static_cast<int64_t>(b.tile) * p.num_seqs + b.seq) * p.num_kv_heads + b.kv_head;
    const int groups = b.active_splits <= p.merge_one_level_max && !defer_groups
                           ? 1
                           : (b.active_splits + kAttentionMergeGroup - 1) / kAttentionMergeGroup;
    if (groups == 1) {
      if (!arrive_last(p.split_counters + tile_index, b.active_splits, last_s, p.arrival_acq_rel))
        return false;
      merge_ranges<D>(p, b, 0, b.active_splits, 1, true);
      return true;
    }
    const int group = b.split / kAttentionMergeGroup, first = group * kAttentionMergeGroup;
    const int count = min(kAttentionMergeGroup, b.active_splits - first);
    if (count > 1) {  // else the group's one range is its partial
      int* group_counter =
          p.split_counters + p.split_counter_capacity + tile_index * kAttentionMaxMergeGroups + group;
      if (!arrive_last(group_counter, count, last_s, p.arrival_acq_rel)) return false;
      merge_ranges<D>(p, b, first, count, 1, false);
    }
    if (defer_groups) return false;  // the next launch merges the groups' partials
    if (!arrive_last(p.split_counters + tile_index, groups, last_s, p.arrival_acq_rel)) return false;
    merge_ranges<D>(p, b, 0, groups, kAttentionMergeGroup, true);
    return true;
  }
  return false;
}

}  // namespace tpserve::kernels::attention
