// Paged decode attention on tensor cores (mma.sync m16n8k16: bf16 in, fp32 accumulate) for the split decode
// path (queries of up to kAttentionMaxSplitQueryLen tokens a sequence; PagedAttentionParams::tensor_cores).
// Same grid, rows and key ranges as the CUDA-core kernel (kernels/paged_attention.cu); per tile of 64 keys
// (K and V copied to shared memory by cp.async, two stages) warp w takes keys 16 w .. 16 w + 15:
//   scores S [16 rows x 16 keys] = Q K^T: Q's A fragments stay in registers for the whole range (ldmatrix
//     once), K's B fragments by ldmatrix; scaled by scale * log2(e) in fp32 and masked (causal, range);
//   online softmax in registers: a row's 16 scores sit in the 4 threads of a quad (lane / 4 = row);
//   O [16 rows x D] += P V: the probabilities, as two bf16 parts (hi + lo, about 16 bits), are P's A
//     fragments as they lie in the registers (the scores' accumulator layout is the A layout), V's B
//     fragments by ldmatrix.trans.
// The warps' (max, sum, O) are then merged through shared memory into the CUDA-core kernel's layout, and the
// block ends as that kernel does (kernels/paged_attention_parts.cuh): rows written, or split partials merged
// by the tile's last block (or left to the next launch: PagedAttentionParams::defer_merge_max_ranges).
// Instances: head_dim 32, 64 and 128. With the prologue folded in (PagedAttentionParams::prologue, decode
// only) the block first normalises and rotates its q rows from qkv in shared memory, and the block holding
// the token's own key computes that key's k and v (warps 0 and 1), appends them to the cache and patches them
// into its last K/V tile, whose copy of that cache row may predate the append.
// PagedAttentionParams::key_rows (one-token steps, groups of up to 8 heads, head_dim 128): the tiles'
// products transposed, keys as the mma rows (kernels/paged_attention_key_rows.cuh); the rest alike. With
// PagedAttentionParams::dim_split as well, the warps split each tile's output dims instead of its keys, and
// the block's end takes their outputs as they are, with no merge of the warps: each warp computes its 16
// keys' scores, and the tile's max and P are shared through shared memory.
#include <type_traits>

#include "kernels/launch.h"
#include "kernels/mma_tile.cuh"
#include "kernels/paged_attention.h"
#include "kernels/paged_attention_key_rows.cuh"
#include "kernels/paged_attention_parts.cuh"
#include "kernels/pdl.cuh"
#include "kernels/phase_trace.cuh"
#include "kernels/qk_norm_rope.cuh"

namespace tpserve::kernels {
TPS_PHASE_TRACE_DEFINE(g_attention_marks, TracedKernel::kDecodeAttention)
namespace {

using namespace attention;  // NOLINT: the kernels' shared pieces

constexpr int kRows = kAttentionMaxGroup;      // query rows of a tile: a few tokens x the group
constexpr int kWarpKeys = 16;                  // keys a warp takes of each tile
constexpr int kTileKeys = kWarps * kWarpKeys;  // 64
static_assert(kRows == 16 && kTileKeys % kAttentionKeysPerSplitQuantum == 0);

template <int D>
struct MmaShape {
  static constexpr int kRowStride = D + 8;  // bf16 a shared row: 16 bytes of padding (ldmatrix conflict-free)
  static constexpr int kKSteps = D / 16;    // k steps of Q K^T
  static constexpr int kDimTiles = D / 8;   // n tiles of P V
  static constexpr size_t kStageBytes = size_t(2) * kTileKeys * kRowStride * sizeof(bf16);  // K and V
  // The warps' O for the merge, rows padded by 8 floats: the quads' 8-byte stores are conflict-free.
  static constexpr int kOutStride = D + 8;
  static constexpr size_t kMergeBytes = size_t(kWarps) * kRows * kOutStride * sizeof(float);
  static constexpr size_t kSmemBytes = 2 * kStageBytes > kMergeBytes ? 2 * kStageBytes : kMergeBytes;
};

// Folded prologue, warp `which` (0: k, 1: v) of the block holding the tile's token's own key: its KV head's k
// (normalised and rotated by `rope`, warp 0's) or v into dst_s [D], and into the cache at `slot` (none if
// < 0).
template <int D>
__device__ void append_token_kv(const PagedAttentionParams& p, const BlockTile& b, int which,
                                const HeadRope& rope, int64_t slot, bf16* dst_s) {
  const PagedAttentionParams::Prologue& pro = p.prologue;
  const int token = b.token_of(0), head = p.num_q_heads + which * p.num_kv_heads + b.kv_head;
  const bf16* src = pro.qkv + static_cast<int64_t>(token) * (p.num_q_heads + 2 * p.num_kv_heads) * D +
                    static_cast<int64_t>(head) * D;
  if (which == 0)
    norm_rope_head(rope, src, dst_s, D, pro.eps);
  else
    copy_head(src, dst_s, D);
  if (slot >= 0)  // each lane copies the elements it wrote
    copy_head(dst_s, (which == 0 ? pro.k_cache : pro.v_cache) + (slot * p.num_kv_heads + b.kv_head) * D, D);
}

// A warp's state over its 16 keys of each tile in the row layout (g = lane / 4, q = lane % 4): the tile's
// query rows g and g + 8 as the mma rows. The interface of KeyRowsWarp
// (kernels/paged_attention_key_rows.cuh).
template <int D>
struct RowTilesWarp {
  using S = MmaShape<D>;
  uint32_t qa[S::kKSteps][4];                 // Q's A fragments
  float acc[S::kDimTiles][4] = {};            // O: (row g, dims 8 n + 2q, + 1), (row g + 8, ..)
  float run_max[2] = {-INFINITY, -INFINITY};  // rows g, g + 8, log2 units
  float run_sum[2] = {0.0f, 0.0f};            // the same rows, this thread's keys only
  int limit[2];                               // the rows' causal key limits

  // q_s [16][D + 8]: the tile's query rows; limit_s [16]: their causal key limits.
  __device__ __forceinline__ void load_q(const bf16 (*q_s)[S::kRowStride], const int* limit_s, int lane) {
    // Matrix m of lane t's address is (rows 8 (m % 2) .., dims 8 (m / 2) ..) of a k step.
    const int m = lane / 8, row = lane % 8 + (m % 2) * 8, col = (m / 2) * 8;
#pragma unroll
    for (int ks = 0; ks < S::kKSteps; ++ks) ldmatrix_x4(qa[ks], &q_s[row][ks * 16 + col]);
    limit[0] = limit_s[lane / 4], limit[1] = limit_s[lane / 4 + 8];
  }

  // Keys key0 .. key0 + 15 (rows warp_key .. + 15 of the tiles), those at or past key_end or a row's limit
  // masked. first_tile: the block's first, whose phases are marked.
  __device__ __forceinline__ void tile(const bf16 (*k_tile)[S::kRowStride],
                                       const bf16 (*v_tile)[S::kRowStride], int warp_key, int key0,
                                       int key_end, float q_scale, int lane,
                                       [[maybe_unused]] bool first_tile) {
    const int q = lane % 4;
    // S = Q K^T: n tiles of 8 keys; K's matrices m: keys 8 (m / 2) .., dims 8 (m % 2) .. of a k step.
    float s[2][4] = {};
    {
      const int m = lane / 8, key = warp_key + lane % 8 + (m / 2) * 8, col = (m % 2) * 8;
#pragma unroll
      for (int ks = 0; ks < S::kKSteps; ++ks) {
        uint32_t kb[4];
        ldmatrix_x4(kb, &k_tile[key][ks * 16 + col]);
        mma_bf16_16816(s[0], qa[ks][0], qa[ks][1], qa[ks][2], qa[ks][3], kb[0], kb[1]);
        mma_bf16_16816(s[1], qa[ks][0], qa[ks][1], qa[ks][2], qa[ks][3], kb[2], kb[3]);
      }
    }
    if (first_tile) TPS_PHASE_MARK(g_attention_marks, 10);
    // Scale and mask; s[nt][i]: row g (i < 2) or g + 8, key key0 + 8 nt + 2 q + i % 2.
    float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int j = key0 + nt * 8 + 2 * q + i % 2;
        s[nt][i] = j < key_end && j < limit[i / 2] ? s[nt][i] * q_scale : -INFINITY;
        tile_max[i / 2] = fmaxf(tile_max[i / 2], s[nt][i]);
      }
    float alpha[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(0xffffffffu, tile_max[h], 1));
      tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(0xffffffffu, tile_max[h], 2));
      const float new_max = fmaxf(run_max[h], tile_max[h]);
      const bool any = new_max != -INFINITY;
      alpha[h] = any ? exp2f(run_max[h] - new_max) : 1.0f;
      run_max[h] = new_max;
      run_sum[h] *= alpha[h];
    }
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const float m = run_max[i / 2];
        s[nt][i] = m != -INFINITY ? exp2f(s[nt][i] - m) : 0.0f;
        run_sum[i / 2] += s[nt][i];
      }
#pragma unroll
    for (int n = 0; n < S::kDimTiles; ++n)
      acc[n][0] *= alpha[0], acc[n][1] *= alpha[0], acc[n][2] *= alpha[1], acc[n][3] *= alpha[1];
    // O += P V: P's A fragment (rows g / g + 8, keys 2q.. and 8 + 2q..) is the scores' layout. P goes in as
    // two bf16 parts, hi + lo, so that it keeps about 16 bits: a single bf16 P (8 bits) left errors of 1% of
    // the output's scale where the terms of P V cancel (an H200 test, CUDA-core kernel: fp32 P).
    if (first_tile) TPS_PHASE_MARK(g_attention_marks, 11);
    uint32_t ph[4], pl[4];
    split_bf16x2(s[0][0], s[0][1], ph[0], pl[0]);
    split_bf16x2(s[0][2], s[0][3], ph[1], pl[1]);
    split_bf16x2(s[1][0], s[1][1], ph[2], pl[2]);
    split_bf16x2(s[1][2], s[1][3], ph[3], pl[3]);
    // V's matrices m (transposed): keys 8 (m % 2) .., dims 8 (m / 2) .. of 16 dims.
    const int m = lane / 8, key = warp_key + lane % 8 + (m % 2) * 8, col = (m / 2) * 8;
#pragma unroll
    for (int dn = 0; dn < S::kDimTiles / 2; ++dn) {
      uint32_t vb[4];
      ldmatrix_x4_trans(vb, &v_tile[key][dn * 16 + col]);
      mma_bf16_16816(acc[2 * dn], ph[0], ph[1], ph[2], ph[3], vb[0], vb[1]);
      mma_bf16_16816(acc[2 * dn], pl[0], pl[1], pl[2], pl[3], vb[0], vb[1]);
      mma_bf16_16816(acc[2 * dn + 1], ph[0], ph[1], ph[2], ph[3], vb[2], vb[3]);
      mma_bf16_16816(acc[2 * dn + 1], pl[0], pl[1], pl[2], pl[3], vb[2], vb[3]);
    }
  }

  // The warp's rows for the block's merge of its warps: max and sum of rows 0..15 and its output rows of
  // warp_out [16][D + 8] (fp32).
  __device__ __forceinline__ void store(float* warp_max, float* warp_sum, float (*warp_out)[D + 8],
                                        int lane) {
    const int g = lane / 4, q = lane % 4;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      run_sum[h] += __shfl_xor_sync(0xffffffffu, run_sum[h], 1);
      run_sum[h] += __shfl_xor_sync(0xffffffffu, run_sum[h], 2);
    }
    if (q == 0) {
      warp_max[g] = run_max[0], warp_max[g + 8] = run_max[1];
      warp_sum[g] = run_sum[0], warp_sum[g + 8] = run_sum[1];
    }
#pragma unroll
    for (int n = 0; n < S::kDimTiles; ++n) {
      const int d = n * 8 + 2 * q;
      *reinterpret_cast<float2*>(&warp_out[g][d]) = make_float2(acc[n][0], acc[n][1]);
      *reinterpret_cast<float2*>(&warp_out[g + 8][d]) = make_float2(acc[n][2], acc[n][3]);
    }
  }
};

// The tiles' layout of an instance: rows (queries as the mma rows), keys as the rows (key_rows), and those
// with the warps splitting dims and sharing the probabilities (key_rows + dim_split).
enum class TileLayout { kRows, kKeyRows, kKeyRowsSharedProbabilities };

template <int D, TileLayout kLayout>
__global__ void __launch_bounds__(kThreads) paged_attention_mma_kernel(const PagedAttentionParams p) {
  using S = MmaShape<D>;
  using T = Tile<D, kRows, kTileKeys>;  // the block's end uses the CUDA-core kernel's P.V layout
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ __align__(16) bf16 q_s[kRows][S::kRowStride];
  __shared__ float warp_max_s[kWarps][kRows], warp_sum_s[kWarps][kRows];
  __shared__ float max_s[kRows], sum_s[kRows];
  __shared__ int limit_s[kRows];
  __shared__ __align__(16) bf16 new_kv_s[2][D];  // folded prologue: the token's own k and v
  auto k_stage = [&](int stage) {
    return reinterpret_cast<bf16(*)[S::kRowStride]>(smem + stage * S::kStageBytes);
  };
  auto v_stage = [&](int stage) {
    return reinterpret_cast<bf16(*)[S::kRowStride]>(smem + stage * S::kStageBytes + S::kStageBytes / 2);
  };

  TPS_PHASE_MARK(g_attention_marks, 0);
  const int tid = threadIdx.x, lane = tid % kWarpSize, warp = tid / kWarpSize;
  // Folded prologue: one token a tile (decode), at position kv_len - 1. The block whose range holds that key
  // (the holder) computes its k and v; with a slot (not < 0) it appends them and uses them for the key.
  // Without one, as in the two ops, the cache is not written and the key is whatever the cache holds there.
  const bool fused = p.prologue.qkv != nullptr;
  // The step inputs: the block's place and key range (query starts, positions), and with the prologue the
  // token's slot and the norm weights with their rotation. Read before the PDL wait where
  // p.inputs_before_wait: no launch right before this one writes them (kernels/pdl.cuh).
  BlockTile b;
  bool active = false, holder = false;
  int64_t slot = -1;
  HeadRope q_rope, k_rope;
  auto read_step_inputs = [&] {
    auto inv_freq = [&](int i) { return p.prologue.inv_freq[i]; };
    // p.prologue_loads_first: what needs no position (norm weights, inverse frequencies; warp 0 the k norm's
    // too, for the holder) goes out before the block's place, and the slot beside the positions; else each
    // after what decides whether it is needed.
    const bool loads_first = fused && p.prologue_loads_first;
    if (loads_first) {
      load_head_rope_weights(q_rope, p.prologue.q_norm_weight, inv_freq, D);
      if (warp == 0) load_head_rope_weights(k_rope, p.prologue.k_norm_weight, inv_freq, D);
    }
    int first_slot = -1;
    active = begin_block<kRows, true>(p, b, limit_s, loads_first ? &first_slot : nullptr);
    if (!active || !fused) return;
    holder = b.key_end == b.kv_len;
    const float position = static_cast<float>(b.kv_len - 1);
    if (!loads_first) load_head_rope_weights(q_rope, p.prologue.q_norm_weight, inv_freq, D);
    rotate_head_rope(q_rope, position, D);
    if (!holder) return;
    if (!loads_first) {
      first_slot = p.prologue.slot_mapping[b.token_of(0)];
      if (warp == 0) load_head_rope_weights(k_rope, p.prologue.k_norm_weight, inv_freq, D);
    }
    slot = first_slot;
    if (warp == 0) rotate_head_rope(k_rope, position, D);
  };
  auto load_tile = [&](int kt, int stage) {
    load_kv_tile<D, kTileKeys>(p, b, kt, k_stage(stage), v_stage(stage));
  };
  // With the prologue folded in, no launch right before this one writes the cache (this kernel appends the
  // token's own key, and patches it into its tile below), so the first K/V tile may go out before the wait
  // too (p.kv_before_wait): at a short context that is the block's whole range, copied during the
  // predecessor's tail.
  const bool kv_early = fused && p.inputs_before_wait && p.kv_before_wait;
  if (p.inputs_before_wait) read_step_inputs();
  if (kv_early && active) load_tile(b.key_begin, 0);
  TPS_PHASE_MARK(g_attention_marks, 1);
  pdl_wait();  // every thread waits, those that return at once included
  if (!p.trigger_after_keys) pdl_trigger();
  TPS_PHASE_MARK(g_attention_marks, 2);
  if (!p.inputs_before_wait) read_step_inputs();
  if (!active) return;
  if (!kv_early) load_tile(b.key_begin, 0);  // the first K/V tile goes out before q is read: overlapped

  // q rows into q_s; the holder's warps 0 and 1 meanwhile compute the token's k and v.
  const int q_first = holder ? 2 * kWarpSize : 0;
  if (holder && warp < 2) {
    append_token_kv<D>(p, b, warp, k_rope, slot, new_kv_s[warp]);
  } else {
    const int64_t qkv_stride = static_cast<int64_t>(p.num_q_heads + 2 * p.num_kv_heads) * D;
    for (int c = tid - q_first; c < kRows * T::kChunksPerRow; c += kThreads - q_first) {
      const int r = c / T::kChunksPerRow, d0 = (c % T::kChunksPerRow) * kBf16PerVec;
      const bf16* src = fused ? p.prologue.qkv + b.token_of(r) * qkv_stride + b.head_of(r) * D
                              : p.q + b.row_index(p, r) * D;
      store_vec(&q_s[r][d0], r < b.rows ? load_vec(src + d0) : make_uint4(0, 0, 0, 0));
    }
  }
  __syncthreads();
  TPS_PHASE_MARK(g_attention_marks, 3);
  if (fused) {
    for (int r = warp; r < b.rows; r += kWarps)
      norm_rope_head(q_rope, &q_s[r][0], &q_s[r][0], D, p.prologue.eps);
    __syncthreads();
    TPS_PHASE_MARK(g_attention_marks, 4);
  }
  // The warp's tiles: q's fragments, its output, its rows' running max and sum.
  constexpr bool kSharedP = kLayout == TileLayout::kKeyRowsSharedProbabilities;
  constexpr int kWarpDims = D / kWarps;  // kSharedP: the output dims a warp owns
  using SharedPWarp = KeyRowsSharedProbabilitiesWarp<D, kTileKeys, kWarps>;
  std::conditional_t<kLayout == TileLayout::kRows, RowTilesWarp<D>,
                     std::conditional_t<kLayout == TileLayout::kKeyRows, KeyRowsWarp<D>, SharedPWarp>>
      tiles;
  tiles.load_q(q_s, limit_s, lane);
  const float q_scale = p.scale * kLog2e;

  int stage = 0;
  for (int kt = b.key_begin; kt < b.key_end; kt += kTileKeys, stage ^= 1) {
    if (kt + kTileKeys < b.key_end) {
      load_tile(kt + kTileKeys, stage ^ 1);
      cp_async_wait_one();
    } else {
      cp_async_wait_all();
    }
    __syncthreads();
    if (kt == b.key_begin) TPS_PHASE_MARK(g_attention_marks, 9);
    if (slot >= 0 && kt + kTileKeys >= b.key_end) {  // the last tile: the token's own key, as just computed
      const int row = b.kv_len - 1 - kt;
      for (int c = tid; c < 2 * T::kChunksPerRow; c += kThreads) {
        const int which = c / T::kChunksPerRow, d0 = (c % T::kChunksPerRow) * kBf16PerVec;
        store_vec(which == 0 ? &k_stage(stage)[row][d0] : &v_stage(stage)[row][d0],
                  load_vec(&new_kv_s[which][d0]));
      }
      __syncthreads();
    }
    const int key0 = kt + warp * kWarpKeys;  // this warp's first key
    if constexpr (kSharedP) {
      // q_s is in registers (qb) since before the first tile's barrier: its shared memory holds the tile's
      // P^T fragments. Every warp passes both barriers, those without keys in the tile too (their P is 0).
      static_assert(sizeof(typename SharedPWarp::Probabilities) <= sizeof(q_s));
      auto& p_s = *reinterpret_cast<typename SharedPWarp::Probabilities*>(&q_s[0][0]);
      tiles.scores(k_stage(stage), warp * kWarpKeys, key0, b.key_end, q_scale, warp_max_s[warp], lane);
      __syncthreads();
      tiles.probabilities(warp_max_s, p_s, warp, lane);
      __syncthreads();
      tiles.pv(v_stage(stage), p_s, kt, b.key_end, warp * kWarpDims, lane);
    } else if (key0 < b.key_end) {
      tiles.tile(k_stage(stage), v_stage(stage), warp * kWarpKeys, key0, b.key_end, q_scale, lane,
                 kt == b.key_begin);
    }
    __syncthreads();  // the next tile's copies overwrite this stage
  }
  if (p.trigger_after_keys) pdl_trigger();  // blocks without keys trigger by exiting
  TPS_PHASE_MARK(g_attention_marks, 5);

  const int dim_group = tid % T::kDimGroups, pv_row_group = tid / T::kDimGroups;
  // This thread's rows (pv_row_group + i * kPvRowGroups): their max and sum, and the block's unnormalised
  // output at dims dim_group * 4 .. + 3.
  float row_max[T::kPvRowsPerThread], row_sum[T::kPvRowsPerThread], out[T::kPvRowsPerThread][4] = {};
  if constexpr (kSharedP) {
    // No merge: the warps' dims of the block's output and the heads' stats, stored, are the block's (the
    // heads' sums are the warps' added).
    auto out_s = reinterpret_cast<float(*)[S::kOutStride]>(smem);  // the K/V stages are free
    tiles.store(max_s, warp_sum_s[warp], out_s, warp * kWarpDims, warp, lane);
    __syncthreads();
    TPS_PHASE_MARK(g_attention_marks, 13);
#pragma unroll
    for (int i = 0; i < T::kPvRowsPerThread; ++i) {
      const int r = pv_row_group + i * T::kPvRowGroups;
      row_max[i] = max_s[r], row_sum[i] = 0.0f;
      if (r < kMmaCols)
#pragma unroll
        for (int w = 0; w < kWarps; ++w) row_sum[i] += warp_sum_s[w][r];
    }
#pragma unroll
    for (int i = 0; i < T::kPvRowsPerThread; ++i) {
      const int r = pv_row_group + i * T::kPvRowGroups;
      if (r >= kMmaCols) continue;  // rows 8..15: none (zero)
      const float4 o = *reinterpret_cast<const float4*>(&out_s[r][dim_group * 4]);
      out[i][0] = o.x, out[i][1] = o.y, out[i][2] = o.z, out[i][3] = o.w;
    }
  } else {
    // Merge the warps: each row's max over warps, the warps' sums and outputs weighted by exp2(max_w - max).
    auto warp_out = reinterpret_cast<float(*)[kRows][S::kOutStride]>(smem);  // the K/V stages are free
    static_assert(S::kOutStride == KeyRowsWarp<D>::kRowStride);
    tiles.store(warp_max_s[warp], warp_sum_s[warp], warp_out[warp], lane);
    __syncthreads();
    TPS_PHASE_MARK(g_attention_marks, 12);
    if (tid < kRows) {
      float mx = -INFINITY;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, warp_max_s[w][tid]);
      float sum = 0.0f;
#pragma unroll
      for (int w = 0; w < kWarps; ++w)
        if (warp_max_s[w][tid] != -INFINITY) sum += exp2f(warp_max_s[w][tid] - mx) * warp_sum_s[w][tid];
      max_s[tid] = mx, sum_s[tid] = sum;
    }
    __syncthreads();
    TPS_PHASE_MARK(g_attention_marks, 13);
    // The rows' max and sum, loaded all at once before the loop that needs the maxima (measured against
    // loading each row's max inside the loop: docs/PERF.md, thirty-seventh and thirty-eighth sessions); the
    // warps' outputs weighed.
    load_row_stats<T>(max_s, sum_s, pv_row_group, row_max, row_sum);
#pragma unroll
    for (int i = 0; i < T::kPvRowsPerThread; ++i) {
      const int r = pv_row_group + i * T::kPvRowGroups;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) {
        if (warp_max_s[w][r] == -INFINITY) continue;  // no key of this warp's for the row
        const float weight = exp2f(warp_max_s[w][r] - row_max[i]);
        const float4 o = *reinterpret_cast<const float4*>(&warp_out[w][r][dim_group * 4]);
        out[i][0] += weight * o.x, out[i][1] += weight * o.y, out[i][2] += weight * o.z,
            out[i][3] += weight * o.w;
      }
    }
  }
  TPS_PHASE_MARK(g_attention_marks, 6);
  [[maybe_unused]] const bool merged_tile = finish_block<T, true>(p, b, out, row_max, row_sum);
  TPS_PHASE_MARK(g_attention_marks, merged_tile ? 8 : 7);
}

template <int D>
void launch_for_head_dim(const PagedAttentionParams& p, cudaStream_t stream, const LaunchPolicy& policy) {
  const int group = p.num_q_heads / p.num_kv_heads, tokens_per_tile = kRows / group;
  const int token_tiles = (p.max_query_len + tokens_per_tile - 1) / tokens_per_tile;
  const dim3 grid(token_tiles * p.num_splits, p.num_seqs, p.num_kv_heads);
  // Keys as the mma rows: one token a tile (its rows the group's heads, at most 8), head_dim 128 only (the
  // shape it is for; one instance more to build).
  const bool key_rows = D == 128 && p.key_rows && p.max_query_len == 1 && group <= kMmaCols;
  constexpr TileLayout kKeyRows = D == 128 ? TileLayout::kKeyRows : TileLayout::kRows;
  constexpr TileLayout kSharedP = D == 128 ? TileLayout::kKeyRowsSharedProbabilities : TileLayout::kRows;
  auto kernel = !key_rows     ? paged_attention_mma_kernel<D, TileLayout::kRows>
                : p.dim_split ? paged_attention_mma_kernel<D, kSharedP>
                              : paged_attention_mma_kernel<D, kKeyRows>;
  launch(policy, Site::kDecodeAttention, Pdl::kEnrolled, kernel, grid, dim3(kThreads),
         MmaShape<D>::kSmemBytes, stream, p);
}

}  // namespace

int paged_attention_mma_blocks_per_sm(int head_dim) {
  int blocks = 0;
  with_head_dim(head_dim, [&](auto d) {
    constexpr int D = decltype(d)::value;
    // The row-tile instance's (the key-row ones take fewer registers: at least as many blocks).
    blocks = resident_blocks_per_sm(
        reinterpret_cast<const void*>(paged_attention_mma_kernel<D, TileLayout::kRows>), kThreads,
        MmaShape<D>::kSmemBytes);
  });
  return blocks;
}

void launch_paged_attention_mma(const PagedAttentionParams& p, cudaStream_t stream,
                                const LaunchPolicy& policy) {
  with_head_dim(p.head_dim, [&](auto d) { launch_for_head_dim<decltype(d)::value>(p, stream, policy); });
}

}  // namespace tpserve::kernels
