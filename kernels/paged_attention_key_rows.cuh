// A one-token decode step's attention tile with the keys as the mma rows (PagedAttentionParams::key_rows;
// kernels/paged_attention_mma.cu): at one token a KV head's query rows are its group's heads, at most 8, so
// the row-tile kernel's m16 tiles leave rows 8-15 empty. Transposed, a warp's 16 keys are the m16 rows and
// the group's heads the n8 columns, and every accumulator element is used:
//   S^T [16 keys x 8 heads] = K Q^T: A = the warp's K rows (ldmatrix), B = the q rows (ldmatrix on q_s);
//   a head's max and sum over the keys: the lanes of one q (shuffles xor 4, 8, 16) and the two key halves;
//   O^T [16 dims x 8 heads] += V^T P^T: A = V^T (ldmatrix.trans of the V rows), B = P^T, the scores'
//   accumulator packed to bf16 pairs and transposed in registers (movmatrix), as hi + lo parts as the
//   row-tile kernel does.
// Half the output registers (D / 4 floats a thread instead of D / 2) and half the mma of the row tiles.
#pragma once

#include "kernels/device_common.cuh"
#include "kernels/mma_tile.cuh"

namespace tpserve::kernels::attention {

// The 8 x 8 b16 matrix whose fragment (row lane / 4, columns 2 (lane % 4), + 1) a holds, transposed: the
// fragment of its transpose.
__device__ __forceinline__ uint32_t movmatrix_trans(uint32_t a) {
  uint32_t d;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(d) : "r"(a));
  return d;
}

// qb: Q^T's B fragments (head lane / 4, dims 16 ks + 2 (lane % 4).., + 8) from q_s [16][D + 8], whose rows
// 0..7 are the group's heads (rows past the group zero).
template <int D>
__device__ __forceinline__ void load_q_columns(uint32_t (&qb)[D / 16][2], const bf16 (*q_s)[D + 8],
                                               int lane) {
  // Matrix m of lane t's address: head t % 8, dims 8 (m % 2) + 16 (m / 2) of a pair of k steps.
  const int m = lane / 8, head = lane % 8, col = (m % 2) * 8 + (m / 2) * 16;
#pragma unroll
  for (int ks = 0; ks < D / 16; ks += 2) {
    uint32_t r[4];
    ldmatrix_x4(r, &q_s[head][ks * 16 + col]);
    qb[ks][0] = r[0], qb[ks][1] = r[1];
    if (ks + 1 < D / 16) qb[ks + 1][0] = r[2], qb[ks + 1][1] = r[3];
  }
}

// The causal key limits of heads 2q, 2q + 1 (q = lane % 4) from limit_s [16] (the block's rows' limits).
__device__ __forceinline__ void load_head_limits(int (&limit)[2], const int* limit_s, int lane) {
  limit[0] = limit_s[2 * (lane % 4)], limit[1] = limit_s[2 * (lane % 4) + 1];
}

// S^T for 16 keys, rows key_row .. + 15 of k_tile: s = (key g, heads 2q, 2q + 1), (key g + 8, ..), unscaled.
template <int D>
__device__ __forceinline__ void key_rows_scores(float (&s)[4], const uint32_t (&qb)[D / 16][2],
                                                const bf16 (*k_tile)[D + 8], int key_row, int lane) {
  // K's matrices m: keys 8 (m % 2) .., dims 8 (m / 2) .. of a k step (A fragments a0..a3).
  const int m = lane / 8, key = key_row + lane % 8 + (m % 2) * 8, col = (m / 2) * 8;
#pragma unroll
  for (int i = 0; i < 4; ++i) s[i] = 0.0f;
#pragma unroll
  for (int ks = 0; ks < D / 16; ++ks) {
    uint32_t ka[4];
    ldmatrix_x4(ka, &k_tile[key][ks * 16 + col]);
    mma_bf16_16816(s, ka[0], ka[1], ka[2], ka[3], qb[ks][0], qb[ks][1]);
  }
}

// The scores scaled by q_scale (log2 units), those of keys at or past key_end or past a head's causal limit
// (limit[h]: head 2q + h's) -inf. key0: the key of s's row 0.
__device__ __forceinline__ void key_rows_mask(float (&s)[4], int key0, int key_end, const int (&limit)[2],
                                              float q_scale, int lane) {
  const int g = lane / 4;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int j = key0 + g + (i / 2) * 8;
    s[i] = j < key_end && j < limit[i % 2] ? s[i] * q_scale : -INFINITY;
  }
}

// The max of heads 2q, 2q + 1 over a warp's masked scores s (every lane of one q gets it).
__device__ __forceinline__ void key_rows_warp_max(const float (&s)[4], float (&tile_max)[2]) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    tile_max[h] = fmaxf(-INFINITY, fmaxf(s[h], s[h + 2]));  // -inf, not NaN, where both are NaN
#pragma unroll
    for (int step = 4; step < kWarpSize; step *= 2)
      tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(0xffffffffu, tile_max[h], step));
  }
}

// The online softmax's step for heads 2q, 2q + 1 over a tile's masked scores s, whose max is tile_max: the
// heads' running max and sum (this thread's keys) updated, the scores made exp2(s - max), and the output acc
// [tiles][4] (O^T fragments: (dim, heads 2q, 2q + 1), (dim + 8, ..)) scaled for the new max.
template <int kDimTiles>
__device__ __forceinline__ void key_rows_softmax(float (&s)[4], const float (&tile_max)[2],
                                                 float (&run_max)[2], float (&run_sum)[2],
                                                 float (&acc)[kDimTiles][4]) {
  float alpha[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float new_max = fmaxf(run_max[h], tile_max[h]);
    alpha[h] = new_max != -INFINITY ? exp2f(run_max[h] - new_max) : 1.0f;
    run_max[h] = new_max;
    run_sum[h] *= alpha[h];
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float mx = run_max[i % 2];
    s[i] = mx != -INFINITY ? exp2f(s[i] - mx) : 0.0f;
    run_sum[i % 2] += s[i];
  }
#pragma unroll
  for (int n = 0; n < kDimTiles; ++n)
    acc[n][0] *= alpha[0], acc[n][1] *= alpha[1], acc[n][2] *= alpha[0], acc[n][3] *= alpha[1];
}

// The same with the max over the warp's own scores.
template <int kDimTiles>
__device__ __forceinline__ void key_rows_softmax(float (&s)[4], float (&run_max)[2], float (&run_sum)[2],
                                                 float (&acc)[kDimTiles][4]) {
  float tile_max[2];
  key_rows_warp_max(s, tile_max);
  key_rows_softmax(s, tile_max, run_max, run_sum, acc);
}

// P^T's B fragments (keys 2q, 2q + 1 | 2q + 8, 2q + 9 of head g) from one chunk's probabilities s (an S^T
// fragment): each 8-key half packed and transposed (movmatrix), as hi + lo parts (about 16 bits of P, as the
// row-tile kernel keeps). p[0..1]: hi of the two halves, p[2..3]: lo.
__device__ __forceinline__ void key_rows_p_fragments(const float (&s)[4], uint32_t (&p)[4]) {
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    uint32_t h, l;
    split_bf16x2(s[2 * half], s[2 * half + 1], h, l);
    p[half] = movmatrix_trans(h), p[2 + half] = movmatrix_trans(l);
  }
}

// O^T [kDimTiles x 16 dims from dim0, 8 heads] += V^T P^T over one chunk of 16 keys (rows key_row .. + 15
// of v_tile), P^T's fragments p as key_rows_p_fragments makes them. V^T's A fragments by ldmatrix.trans.
template <int D, int kDimTiles>
__device__ __forceinline__ void key_rows_pv(float (&acc)[kDimTiles][4], const uint32_t (&p)[4],
                                            const bf16 (*v_tile)[D + 8], int key_row, int dim0, int lane) {
  // Matrix m of lane t's address: keys 8 (m / 2) .., dims 8 (m % 2) .. of 16 dims, transposed (a0: dims g,
  // keys 2q..; a1: dims g + 8; a2, a3: keys + 8).
  const int m = lane / 8, key = key_row + lane % 8 + (m / 2) * 8, col = dim0 + (m % 2) * 8;
#pragma unroll
  for (int n = 0; n < kDimTiles; ++n) {
    uint32_t va[4];
    ldmatrix_x4_trans(va, &v_tile[key][n * 16 + col]);
    mma_bf16_16816(acc[n], va[0], va[1], va[2], va[3], p[0], p[1]);
    mma_bf16_16816(acc[n], va[0], va[1], va[2], va[3], p[2], p[3]);
  }
}

// The same from the chunk's probabilities s.
template <int D, int kDimTiles>
__device__ __forceinline__ void key_rows_pv(float (&acc)[kDimTiles][4], const float (&s)[4],
                                            const bf16 (*v_tile)[D + 8], int key_row, int dim0, int lane) {
  uint32_t p[4];
  key_rows_p_fragments(s, p);
  key_rows_pv<D>(acc, p, v_tile, key_row, dim0, lane);
}

// The head sums of a warp's threads (each over its own keys) added up over the lanes of one q.
__device__ __forceinline__ void key_rows_sum_over_keys(float (&run_sum)[2]) {
#pragma unroll
  for (int h = 0; h < 2; ++h)
#pragma unroll
    for (int step = 4; step < kWarpSize; step *= 2)
      run_sum[h] += __shfl_xor_sync(0xffffffffu, run_sum[h], step);
}

// O^T fragments acc (dims dim0 + 16 n + g / + 8, heads 2q, 2q + 1) into out_s [heads][D + 8] (fp32).
template <int D, int kDimTiles>
__device__ __forceinline__ void key_rows_store_out(const float (&acc)[kDimTiles][4], float (*out_s)[D + 8],
                                                   int dim0, int lane) {
  const int g = lane / 4, q = lane % 4;
#pragma unroll
  for (int n = 0; n < kDimTiles; ++n) {
    const int d = dim0 + n * 16 + g;
    out_s[2 * q][d] = acc[n][0], out_s[2 * q + 1][d] = acc[n][1];
    out_s[2 * q][d + 8] = acc[n][2], out_s[2 * q + 1][d + 8] = acc[n][3];
  }
}

// The heads' max and sum (run_max / run_sum of heads 2q, 2q + 1, summed over the keys already) into rows
// 0..7 of max_s / sum_s, rows 8..15 none (-inf, 0).
__device__ __forceinline__ void key_rows_store_stats(const float (&run_max)[2], const float (&run_sum)[2],
                                                     float* max_s, float* sum_s, int lane) {
  const int g = lane / 4, q = lane % 4;
  if (g == 0) {
    max_s[2 * q] = run_max[0], max_s[2 * q + 1] = run_max[1];
    sum_s[2 * q] = run_sum[0], sum_s[2 * q + 1] = run_sum[1];
  }
  if (lane < 8) max_s[8 + lane] = -INFINITY, sum_s[8 + lane] = 0.0f;
}

// What every key-row layout's warp holds (g = lane / 4, q = lane % 4): q's fragments, the heads' limits,
// its output's kDimTiles tiles of 16 dims and the heads' running max and sum.
template <int D, int kDimTiles>
struct KeyRowsState {
  static constexpr int kRowStride = D + 8;    // bf16 a shared row (q_s, K and V tiles)
  uint32_t qb[D / 16][2];                     // B fragments of Q^T: head g, dims 16 ks + 2q.., + 8
  float acc[kDimTiles][4] = {};               // O^T: (dim dim0 + 16 n + g, heads 2q, 2q + 1), (dim + 8, ..)
  float run_max[2] = {-INFINITY, -INFINITY};  // heads 2q, 2q + 1, log2 units
  float run_sum[2] = {0.0f, 0.0f};            // the same heads, this thread's keys only
  int limit[2];                               // the heads' causal key limits

  // q_s [16][D + 8]: rows 0..7 the group's heads (rows past the group zero); limit_s [16]: the rows' causal
  // key limits.
  __device__ __forceinline__ void load_q(const bf16 (*q_s)[kRowStride], const int* limit_s, int lane) {
    load_q_columns<D>(qb, q_s, lane);
    load_head_limits(limit, limit_s, lane);
  }
};

// A warp's state over its 16 keys of each tile (g = lane / 4, q = lane % 4): head columns 2q, 2q + 1, all
// D dims; the block merges its warps.
template <int D>
struct KeyRowsWarp : KeyRowsState<D, D / 16> {
  using State = KeyRowsState<D, D / 16>;
  using State::acc, State::kRowStride, State::limit, State::qb, State::run_max, State::run_sum;
  static constexpr int kDimTiles = D / 16;  // m tiles of V^T P^T (16 dims each)

  // Keys key0 .. key0 + 15 (rows warp_key .. + 15 of the tiles), those at or past key_end or a head's limit
  // masked. first_tile: unused (no phase marks inside; the row tiles' interface).
  __device__ __forceinline__ void tile(const bf16 (*k_tile)[kRowStride], const bf16 (*v_tile)[kRowStride],
                                       int warp_key, int key0, int key_end, float q_scale, int lane,
                                       bool /*first_tile*/) {
    float s[4];
    key_rows_scores<D>(s, qb, k_tile, warp_key, lane);
    key_rows_mask(s, key0, key_end, limit, q_scale, lane);
    key_rows_softmax(s, run_max, run_sum, acc);
    key_rows_pv<D>(acc, s, v_tile, warp_key, 0, lane);
  }

  // The warp's rows for the block's merge of its warps: max and sum of rows (heads) 0..15 (8..15 none) and
  // its output rows 0..7 of warp_out [16][D + 8] (fp32).
  __device__ __forceinline__ void store(float* warp_max, float* warp_sum, float (*warp_out)[D + 8],
                                        int lane) {
    key_rows_sum_over_keys(run_sum);
    key_rows_store_stats(run_max, run_sum, warp_max, warp_sum, lane);
    key_rows_store_out<D>(acc, warp_out, 0, lane);
  }
};

// PagedAttentionParams::dim_split: kWarpCount warps split a tile's output dims instead of its keys. Each warp
// computes its 16 keys' scores of a tile (as KeyRowsWarp), the block shares the heads' max over the tile and
// P^T's fragments through shared memory, and each warp then computes its D / kWarpCount output dims over all
// the tile's keys. Two block barriers a tile (every warp computing all the tile's scores instead, with no
// barrier, measured 0.3% slower on the step and 3-7% slower alone: docs/PERF.md, forty-third session); at
// the end, each warp's sums over its keys are added, and no output is merged. Every warp keeps the same
// running max (the tile's, shared).
template <int D, int kTileKeys, int kWarpCount>
struct KeyRowsSharedProbabilitiesWarp : KeyRowsState<D, D / kWarpCount / 16> {
  using State = KeyRowsState<D, D / kWarpCount / 16>;
  using State::acc, State::kRowStride, State::limit, State::qb, State::run_max, State::run_sum;
  static constexpr int kChunks = kTileKeys / 16;    // 16-key chunks of a tile: one a warp
  static constexpr int kWarpDims = D / kWarpCount;  // output dims a warp owns
  static constexpr int kDimTiles = kWarpDims / 16;  // m tiles of V^T P^T (16 dims each)
  static_assert(kChunks == kWarpCount && kWarpDims % 16 == 0);
  // P^T's fragments of chunk c, as key_rows_p_fragments makes them: [c][fragment][lane].
  using Probabilities = uint32_t[kChunks][4][kWarpSize];
  float s[4];  // the warp's chunk of the tile: scores, then probabilities

  // Step 1 of a tile: the scores of keys key0 .. key0 + 15 (rows warp_key .. + 15 of k_tile), masked as
  // KeyRowsWarp does, and the warp's max of each head into warp_max [8] (heads).
  __device__ __forceinline__ void scores(const bf16 (*k_tile)[kRowStride], int warp_key, int key0,
                                         int key_end, float q_scale, float* warp_max, int lane) {
    key_rows_scores<D>(s, qb, k_tile, warp_key, lane);
    key_rows_mask(s, key0, key_end, limit, q_scale, lane);
    float tile_max[2];
    key_rows_warp_max(s, tile_max);
    const int g = lane / 4, q = lane % 4;
    if (g == 0) warp_max[2 * q] = tile_max[0], warp_max[2 * q + 1] = tile_max[1];
  }

  // Step 2, after a block barrier: the tile's max of each head over the warps' (warp_max_s [warps][>= 8]),
  // the online softmax's step with it, and the warp's P^T fragments into p_s[warp].
  __device__ __forceinline__ void probabilities(const float (*warp_max_s)[16], Probabilities& p_s, int warp,
                                                int lane) {
    const int q = lane % 4;
    float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int w = 0; w < kWarpCount; ++w)
      tile_max[0] = fmaxf(tile_max[0], warp_max_s[w][2 * q]),
      tile_max[1] = fmaxf(tile_max[1], warp_max_s[w][2 * q + 1]);
    key_rows_softmax(s, tile_max, run_max, run_sum, acc);
    uint32_t p[4];
    key_rows_p_fragments(s, p);
#pragma unroll
    for (int f = 0; f < 4; ++f) p_s[warp][f][lane] = p[f];
  }

  // Step 3, after a block barrier: O^T for dims dim0 .. dim0 + kWarpDims - 1 over the tile's chunks that
  // hold keys (kt: the tile's first key), from every warp's P^T fragments.
  __device__ __forceinline__ void pv(const bf16 (*v_tile)[kRowStride], const Probabilities& p_s, int kt,
                                     int key_end, int dim0, int lane) {
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      if (kt + 16 * c >= key_end) continue;  // P is 0 there
      const uint32_t p[4] = {p_s[c][0][lane], p_s[c][1][lane], p_s[c][2][lane], p_s[c][3][lane]};
      key_rows_pv<D>(acc, p, v_tile, 16 * c, dim0, lane);
    }
  }

  // The block's output rows 0..7 (heads), dims dim0.., into out_s [16][D + 8] (fp32); the warp's sums over
  // its keys into warp_sum [8]; warp 0 also the heads' max into max_s (rows 8..15: -inf).
  __device__ __forceinline__ void store(float* max_s, float* warp_sum, float (*out_s)[D + 8], int dim0,
                                        int warp, int lane) {
    const int g = lane / 4, q = lane % 4;
    key_rows_sum_over_keys(run_sum);
    if (g == 0) warp_sum[2 * q] = run_sum[0], warp_sum[2 * q + 1] = run_sum[1];
    if (warp == 0) {
      if (g == 0) max_s[2 * q] = run_max[0], max_s[2 * q + 1] = run_max[1];
      if (lane < 8) max_s[8 + lane] = -INFINITY;
    }
    key_rows_store_out<D>(acc, out_s, dim0, lane);
  }
};

}  // namespace tpserve::kernels::attention
