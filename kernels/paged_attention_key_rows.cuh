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

// A warp's state over its keys of the block's range (g = lane / 4, q = lane % 4): head columns 2q, 2q + 1.
template <int D>
struct KeyRowsWarp {
  static constexpr int kKSteps = D / 16;      // k steps of K Q^T (16 dims each)
  static constexpr int kDimTiles = D / 16;    // m tiles of V^T P^T (16 dims each)
  static constexpr int kRowStride = D + 8;    // bf16 a shared row (q_s, K and V tiles)
  uint32_t qb[kKSteps][2];                    // B fragments of Q^T: head g, dims 16 ks + 2q.., + 8
  float acc[kDimTiles][4] = {};               // O^T: (dim 16 n + g, heads 2q, 2q + 1), (dim + 8, ..)
  float run_max[2] = {-INFINITY, -INFINITY};  // heads 2q, 2q + 1, log2 units
  float run_sum[2] = {0.0f, 0.0f};            // the same heads, this thread's keys only
  int limit[2];                               // the heads' causal key limits

  // q_s [16][D + 8]: rows 0..7 the group's heads (rows past the group zero); limit_s [16]: the rows' causal
  // key limits.
  __device__ __forceinline__ void load_q(const bf16 (*q_s)[kRowStride], const int* limit_s, int lane) {
    // Matrix m of lane t's address: head t % 8, dims 8 (m % 2) + 16 (m / 2) of a pair of k steps.
    const int m = lane / 8, head = lane % 8, col = (m % 2) * 8 + (m / 2) * 16;
#pragma unroll
    for (int ks = 0; ks < kKSteps; ks += 2) {
      uint32_t r[4];
      ldmatrix_x4(r, &q_s[head][ks * 16 + col]);
      qb[ks][0] = r[0], qb[ks][1] = r[1];
      if (ks + 1 < kKSteps) qb[ks + 1][0] = r[2], qb[ks + 1][1] = r[3];
    }
    limit[0] = limit_s[2 * (lane % 4)], limit[1] = limit_s[2 * (lane % 4) + 1];
  }

  // Keys key0 .. key0 + 15 (rows warp_key .. + 15 of the tiles), those at or past key_end or a head's limit
  // masked. first_tile: unused (no phase marks inside; the row tiles' interface).
  __device__ __forceinline__ void tile(const bf16 (*k_tile)[kRowStride], const bf16 (*v_tile)[kRowStride],
                                       int warp_key, int key0, int key_end, float q_scale, int lane,
                                       bool /*first_tile*/) {
    const int g = lane / 4;
    float s[4] = {};  // (key g, heads 2q, 2q + 1), (key g + 8, ..)
    {
      // K's matrices m: keys 8 (m % 2) .., dims 8 (m / 2) .. of a k step (A fragments a0..a3).
      const int m = lane / 8, key = warp_key + lane % 8 + (m % 2) * 8, col = (m / 2) * 8;
#pragma unroll
      for (int ks = 0; ks < kKSteps; ++ks) {
        uint32_t ka[4];
        ldmatrix_x4(ka, &k_tile[key][ks * 16 + col]);
        mma_bf16_16816(s, ka[0], ka[1], ka[2], ka[3], qb[ks][0], qb[ks][1]);
      }
    }
    float tile_max[2];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int j = key0 + g + (i / 2) * 8;
      s[i] = j < key_end && j < limit[i % 2] ? s[i] * q_scale : -INFINITY;
    }
    float alpha[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      tile_max[h] = fmaxf(s[h], s[h + 2]);
#pragma unroll
      for (int step = 4; step < kWarpSize; step *= 2)
        tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(0xffffffffu, tile_max[h], step));
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
    // P^T's B fragments (keys 2q, 2q + 1 | 2q + 8, 2q + 9 of head g): each 8-key half of the scores,
    // packed, transposed; hi + lo parts (about 16 bits of P, as the row-tile kernel keeps).
    uint32_t hi[2], lo[2];
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      uint32_t h, l;
      split_bf16x2(s[2 * half], s[2 * half + 1], h, l);
      hi[half] = movmatrix_trans(h), lo[half] = movmatrix_trans(l);
    }
    // V^T's A fragments: matrix m of lane t's address, keys 8 (m / 2) .., dims 8 (m % 2) .. of 16 dims,
    // transposed (a0: dims g, keys 2q..; a1: dims g + 8; a2, a3: keys + 8).
    const int m = lane / 8, key = warp_key + lane % 8 + (m / 2) * 8, col = (m % 2) * 8;
#pragma unroll
    for (int n = 0; n < kDimTiles; ++n) {
      uint32_t va[4];
      ldmatrix_x4_trans(va, &v_tile[key][n * 16 + col]);
      mma_bf16_16816(acc[n], va[0], va[1], va[2], va[3], hi[0], hi[1]);
      mma_bf16_16816(acc[n], va[0], va[1], va[2], va[3], lo[0], lo[1]);
    }
  }

  // The warp's rows for the block's merge of its warps: max and sum of rows (heads) 0..15 (8..15 none) and
  // its output rows 0..7 of warp_out [16][D + 8] (fp32).
  __device__ __forceinline__ void store(float* warp_max, float* warp_sum, float (*warp_out)[D + 8],
                                        int lane) {
    const int g = lane / 4, q = lane % 4;
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int step = 4; step < kWarpSize; step *= 2)
        run_sum[h] += __shfl_xor_sync(0xffffffffu, run_sum[h], step);
    if (g == 0) {
      warp_max[2 * q] = run_max[0], warp_max[2 * q + 1] = run_max[1];
      warp_sum[2 * q] = run_sum[0], warp_sum[2 * q + 1] = run_sum[1];
    }
    if (lane < 8) warp_max[8 + lane] = -INFINITY, warp_sum[8 + lane] = 0.0f;
#pragma unroll
    for (int n = 0; n < kDimTiles; ++n) {
      const int d = n * 16 + g;
      warp_out[2 * q][d] = acc[n][0], warp_out[2 * q + 1][d] = acc[n][1];
      warp_out[2 * q][d + 8] = acc[n][2], warp_out[2 * q + 1][d + 8] = acc[n][3];
    }
  }
};

}  // namespace tpserve::kernels::attention
