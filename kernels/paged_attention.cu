// Paged GQA attention on CUDA cores with an online softmax in fp32 (log2 domain).
//
// Block = (query-row tile, sequence, KV head [, context split]), 128 threads. Per tile of kKeys keys:
//   1. cp.async K and V rows of the tile into shared memory (16-byte pieces, rows padded by 16 bytes so that
//      the per-key reads below are free of bank conflicts; keys past the range are zero-filled); with two
//      stages the next tile is in flight while this one is computed;
//   2. scores: thread (key, row group) dots its key with its rows' q (q kept in shared memory in fp32,
//      pre-scaled by scale * log2(e)); masked keys (past the row's position or the range) get -inf;
//   3. softmax: one warp per row updates the running max / sum and turns scores into probabilities;
//   4. P.V: thread (4 dims, row group) rescales its accumulators and adds p * v over the tile's keys.
// Then the output; when the tile's context has several non-empty ranges, each block writes its unnormalised
// partials and counts its arrival, and the last to arrive merges them all (no separate reduce launch).
// Template instances: decode and short queries (16 rows = a few tokens x the group, 32-key tiles, two
// stages, split) and prefill (32 rows, 32-key tiles, one stage), each for head_dim 32, 64 and 128; all stay
// within 48 KB of static shared memory.
#include <algorithm>
#include <cfloat>

#include "common/error.h"
#include "kernels/device_common.cuh"
#include "kernels/launch.h"
#include "kernels/paged_attention.h"
#include "kernels/paged_attention_parts.cuh"
#include "kernels/pdl.cuh"

namespace tpserve::kernels {
namespace {

using namespace attention;  // NOLINT: the kernels' shared pieces (kernels/paged_attention_parts.cuh)

constexpr int kDecodeRows = kAttentionMaxGroup;  // query rows of a decode tile: a few tokens x the group

// kSplit: the context may be cut into ranges (num_splits > 1), merged by the last block of each tile.
template <int D, int kRows, int kKeys, int kStages, bool kSplit>
__global__ void __launch_bounds__(kThreads) paged_attention_kernel(const PagedAttentionParams p) {
  using T = Tile<D, kRows, kKeys>;
  static_assert(kThreads % kKeys == 0 && kRows % T::kQkRowGroups == 0);
  static_assert(kKeys % kWarpSize == 0 && kAttentionCudaCoreSplitKeys % kKeys == 0);
  static_assert(kStages == 1 || kStages == 2);
  // Read as float4: 16-byte aligned whatever static shared memory the compiler places before it
  // (finish_block's flag).
  __shared__ __align__(16) float q_s[kRows][D];
  __shared__ __align__(16) bf16 k_s[kStages][kKeys][T::kRowStride];
  __shared__ __align__(16) bf16 v_s[kStages][kKeys][T::kRowStride];
  __shared__ float s_s[kRows][kKeys];
  __shared__ float alpha_s[kRows], max_s[kRows], sum_s[kRows];
  __shared__ int limit_s[kRows];

  pdl_wait_then_trigger();
  const int tid = threadIdx.x, lane = tid % kWarpSize, warp = tid / kWarpSize;
  BlockTile b;
  if (!begin_block<kRows, kSplit>(p, b, limit_s)) return;
  const int rows = b.rows, key_begin = b.key_begin, key_end = b.key_end;
  auto load_tile = [&](int kt, int stage) { load_kv_tile<D, kKeys>(p, b, kt, k_s[stage], v_s[stage]); };

  load_tile(key_begin, 0);  // the first K/V tile goes out before q is read: their latencies overlap

  // q, pre-scaled so that softmax runs in exp2.
  const float q_scale = p.scale * kLog2e;
  for (int c = tid; c < kRows * T::kChunksPerRow; c += kThreads) {
    const int r = c / T::kChunksPerRow, d0 = (c % T::kChunksPerRow) * kBf16PerVec;
    float v[kBf16PerVec] = {};
    if (r < rows) unpack_bf16x8(load_vec(p.q + b.row_index(p, r) * D + d0), v);
#pragma unroll
    for (int j = 0; j < kBf16PerVec; ++j) q_s[r][d0 + j] = v[j] * q_scale;
  }
  __syncthreads();

  float run_max[T::kSoftmaxRowsPerWarp], run_sum[T::kSoftmaxRowsPerWarp];
#pragma unroll
  for (int i = 0; i < T::kSoftmaxRowsPerWarp; ++i) run_max[i] = -INFINITY, run_sum[i] = 0.0f;
  const int dim_group = tid % T::kDimGroups, pv_row_group = tid / T::kDimGroups;
  float acc[T::kPvRowsPerThread][4] = {};

  int stage = 0;
  for (int kt = key_begin; kt < key_end; kt += kKeys, stage = kStages == 2 ? stage ^ 1 : 0) {
    // 1. This tile's K/V in shared memory. Two stages: the next tile's copies go out first (the trailing
    //    barrier of the previous iteration freed that stage). One stage: this tile's copies, then wait.
    if constexpr (kStages == 2) {
      if (kt + kKeys < key_end) {
        load_tile(kt + kKeys, stage ^ 1);
        cp_async_wait_one();
      } else {
        cp_async_wait_all();
      }
    } else {
      if (kt != key_begin) load_tile(kt, 0);
      cp_async_wait_all();
    }
    __syncthreads();
    const auto& k_tile = k_s[stage];
    const auto& v_tile = v_s[stage];

    // 2. Scores.
    {
      const int key = tid % kKeys, row_group = tid / kKeys;
      float dot[T::kQkRowsPerThread] = {};
#pragma unroll 4
      for (int c = 0; c < T::kChunksPerRow; ++c) {
        float k[kBf16PerVec];
        unpack_bf16x8(load_vec(&k_tile[key][c * kBf16PerVec]), k);
#pragma unroll
        for (int i = 0; i < T::kQkRowsPerThread; ++i) {
          const int r = row_group + i * T::kQkRowGroups;
          if (r >= rows) break;
          const float4 qa = *reinterpret_cast<const float4*>(&q_s[r][c * kBf16PerVec]);
          const float4 qb = *reinterpret_cast<const float4*>(&q_s[r][c * kBf16PerVec + 4]);
          dot[i] += qa.x * k[0] + qa.y * k[1] + qa.z * k[2] + qa.w * k[3] + qb.x * k[4] + qb.y * k[5] +
                    qb.z * k[6] + qb.w * k[7];
        }
      }
      const int j = kt + key;
#pragma unroll
      for (int i = 0; i < T::kQkRowsPerThread; ++i) {
        const int r = row_group + i * T::kQkRowGroups;
        if (r >= rows) break;
        s_s[r][key] = j < key_end && j < limit_s[r] ? dot[i] : -INFINITY;
      }
    }
    __syncthreads();

    // 3. Online softmax, one warp per row.
#pragma unroll
    for (int i = 0; i < T::kSoftmaxRowsPerWarp; ++i) {
      const int r = warp + i * kWarps;
      if (r >= rows) break;
      float s[T::kKeysPerLane];
      float tile_max = -INFINITY;
#pragma unroll
      for (int v = 0; v < T::kKeysPerLane; ++v)
        tile_max = fmaxf(tile_max, s[v] = s_s[r][lane + v * kWarpSize]);
      const float new_max = fmaxf(run_max[i], warp_max(tile_max));
      const bool any = new_max != -INFINITY;
      const float alpha = any ? exp2f(run_max[i] - new_max) : 1.0f;
      float tile_sum = 0.0f;
#pragma unroll
      for (int v = 0; v < T::kKeysPerLane; ++v) {
        const float prob = any ? exp2f(s[v] - new_max) : 0.0f;
        s_s[r][lane + v * kWarpSize] = prob;
        tile_sum += prob;
      }
      run_sum[i] = run_sum[i] * alpha + warp_sum(tile_sum);
      run_max[i] = new_max;
      if (lane == 0) alpha_s[r] = alpha;
    }
    __syncthreads();

    // 4. P.V.
    const int tile_keys = min(kKeys, key_end - kt);
#pragma unroll
    for (int i = 0; i < T::kPvRowsPerThread; ++i) {
      const int r = pv_row_group + i * T::kPvRowGroups;
      if (r >= rows) break;
      const float alpha = alpha_s[r];
#pragma unroll
      for (int d = 0; d < 4; ++d) acc[i][d] *= alpha;
    }
    for (int key = 0; key < tile_keys; ++key) {
      const uint2 packed = *reinterpret_cast<const uint2*>(&v_tile[key][dim_group * 4]);
      const float v0 = __uint_as_float(packed.x << 16), v1 = __uint_as_float(packed.x & 0xffff0000u);
      const float v2 = __uint_as_float(packed.y << 16), v3 = __uint_as_float(packed.y & 0xffff0000u);
#pragma unroll
      for (int i = 0; i < T::kPvRowsPerThread; ++i) {
        const int r = pv_row_group + i * T::kPvRowGroups;
        if (r >= rows) break;
        const float prob = s_s[r][key];
        acc[i][0] += prob * v0, acc[i][1] += prob * v1, acc[i][2] += prob * v2, acc[i][3] += prob * v3;
      }
    }
    __syncthreads();  // the next tile overwrites k_s, v_s and s_s
  }

  if (lane == 0) {
#pragma unroll
    for (int i = 0; i < T::kSoftmaxRowsPerWarp; ++i) {
      const int r = warp + i * kWarps;
      if (r < rows) max_s[r] = run_max[i], sum_s[r] = run_sum[i];
    }
  }
  __syncthreads();
  // Each of this thread's rows' max and sum (rows past `rows` read unwritten values, which finish_block never
  // uses: it stops at the first such row).
  float row_max[T::kPvRowsPerThread], row_sum[T::kPvRowsPerThread];
  load_row_stats<T>(max_s, sum_s, tid / T::kDimGroups, row_max, row_sum);
  finish_block<T, kSplit>(p, b, acc, row_max, row_sum);
}

template <int D, int kRows, int kKeys, int kStages, bool kSplit>
void launch_tiles(const PagedAttentionParams& p, Site site, cudaStream_t stream, const LaunchPolicy& policy) {
  const int group = p.num_q_heads / p.num_kv_heads, tokens_per_block = kRows / group;
  const int token_tiles = (p.max_query_len + tokens_per_block - 1) / tokens_per_block;
  const dim3 grid(token_tiles * p.num_splits, p.num_seqs, p.num_kv_heads);
  launch(policy, site, Pdl::kEnrolled, paged_attention_kernel<D, kRows, kKeys, kStages, kSplit>, grid,
         dim3(kThreads), 0, stream, p);
}

template <int D>
void launch_for_head_dim(const PagedAttentionParams& p, cudaStream_t stream, const LaunchPolicy& policy) {
  if (p.max_query_len <= kAttentionMaxSplitQueryLen) {
    const int quantum = p.tensor_cores ? kAttentionKeysPerSplitQuantum : kAttentionCudaCoreSplitKeys;
    TPS_CHECK(p.split_keys >= quantum && p.split_keys % quantum == 0, "paged attention: ranges of ",
              p.split_keys, " keys (a multiple of ", quantum, p.tensor_cores ? "" : " on CUDA cores", ")");
    TPS_CHECK(p.merge_one_level_max >= kAttentionMergeGroup, "paged attention: one-level merges of up to ",
              p.merge_one_level_max, " ranges (at least ", kAttentionMergeGroup, ")");
    TPS_CHECK(p.num_splits >= 1 && p.num_splits <= kAttentionMaxSplits, "paged attention: ", p.num_splits,
              " context ranges (1 to ", kAttentionMaxSplits,
              ": the merge groups' counters are sized for it)");
    if (p.num_splits > 1) {
      const int tokens_per_tile = kDecodeRows / (p.num_q_heads / p.num_kv_heads);
      const int64_t tiles =
          int64_t((p.max_query_len + tokens_per_tile - 1) / tokens_per_tile) * p.num_seqs * p.num_kv_heads;
      TPS_CHECK(p.split_counters != nullptr && tiles <= p.split_counter_capacity, "paged attention: ", tiles,
                " split tiles, ", p.split_counter_capacity, " split counters");
    }
    TPS_CHECK(p.prologue.qkv == nullptr || (p.tensor_cores && p.max_query_len == 1),
              "paged attention: the folded q/k norm + RoPE needs the tensor-core kernel and one token a "
              "sequence (max_query_len ",
              p.max_query_len, ", tensor cores ", p.tensor_cores, ")");
    if (p.tensor_cores)
      launch_paged_attention_mma(p, stream, policy);
    else
      launch_tiles<D, kDecodeRows, 32, 2, true>(p, Site::kDecodeAttention, stream, policy);
  } else {
    TPS_CHECK(p.num_splits == 1 && p.prologue.qkv == nullptr, "paged attention: ", p.num_splits,
              " splits (or a folded prologue) for queries of ", p.max_query_len, " tokens");
    launch_tiles<D, 2 * kAttentionMaxGroup, 32, 1, false>(p, Site::kPrefillAttention, stream, policy);
  }
}

// Split counters a backend holds: for up to this many tiles a SM (a step with more is not split).
constexpr int kMaxSplitTilesPerSm = 4;

}  // namespace

int attention_split_counter_capacity(int num_sms) {
  return kMaxSplitTilesPerSm * std::max(num_sms, 1);
}

int attention_split_counter_entries(int num_sms) {
  return attention_split_counter_capacity(num_sms) * (1 + kAttentionMaxMergeGroups);
}

size_t attention_partial_bytes(int num_tokens, int num_q_heads, int head_dim, int num_splits) {
  return static_cast<size_t>(num_tokens) * num_q_heads * num_splits * (head_dim + 2) * sizeof(float);
}

void plan_decode_splits(PagedAttentionParams& p, int max_context_len, int num_tokens, int num_sms,
                        size_t max_partial_bytes, int blocks_per_sm) {
  p.num_splits = 1;
  if (p.max_query_len > kAttentionMaxSplitQueryLen) return;
  const int tokens_per_tile = kDecodeRows / (p.num_q_heads / p.num_kv_heads);
  const int token_tiles = (p.max_query_len + tokens_per_tile - 1) / tokens_per_tile;
  const int tiles = std::max(1, p.num_seqs * p.num_kv_heads * token_tiles);  // blocks of one range each
  if (tiles > attention_split_counter_capacity(num_sms)) return;  // the backend's counters are sized by it
  const int q = p.split_keys, context = std::max(max_context_len, 1);
  // One wave: as many blocks as the SMs hold at once (a second, partial wave would leave most SMs idle at
  // its end while it runs a whole range).
  int splits = std::min({std::max(1, std::max(blocks_per_sm, 1) * num_sms / tiles), (context + q - 1) / q,
                         kAttentionMaxSplits});
  // No more ranges than the longest context uses (the square-root floor makes long ranges at long contexts).
  const int keys = attention_keys_per_split(context, splits, q, p.split_growth, p.split_min_keys);
  splits = std::min(splits, (context + keys - 1) / keys);
  while (splits > 1 &&
         attention_partial_bytes(num_tokens, p.num_q_heads, p.head_dim, splits) > max_partial_bytes)
    --splits;
  p.num_splits = std::max(splits, 1);
}

int attention_decode_blocks_per_sm(bool tensor_cores, int head_dim) {
  if (tensor_cores) return paged_attention_mma_blocks_per_sm(head_dim);
  int blocks = 0;
  with_head_dim(head_dim, [&](auto d) {
    constexpr int D = decltype(d)::value;
    blocks = resident_blocks_per_sm(
        reinterpret_cast<const void*>(paged_attention_kernel<D, kDecodeRows, 32, 2, true>), kThreads, 0);
  });
  return blocks;
}

void launch_paged_attention(const PagedAttentionParams& p, cudaStream_t stream, const LaunchPolicy& policy) {
  with_head_dim(p.head_dim, [&](auto d) { launch_for_head_dim<decltype(d)::value>(p, stream, policy); });
}

}  // namespace tpserve::kernels
