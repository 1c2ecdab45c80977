// A warp's 16 x (8 * NT) tile of  C[row, col] = sum_k A[row, k] * B[col, k]  on tensor cores
// (mma.sync m16n8k16, bf16 in, fp32 accumulate), for the skinny products of decode: A = weight rows, B = a
// few activation rows (tokens). Used by the GEMV and by the fused MoE kernels.
//
// Loads are 16 bytes per thread and never shuffled: a dot product does not care about the order of k, so
// within each 32-wide block of k the thread (g = lane / 4, q = lane % 4) loads the 8 contiguous elements
// [q * 8, q * 8 + 8) of its A rows g and g + 8 and of its B column g (+ 8 * nt), and those 8 elements fill
// exactly the k-slots {2q, 2q+1, 2q+8, 2q+9} of two consecutive m16n8k16 steps, for A and B alike:
//   step 0 uses elements 0-3 (slots 2q, 2q+1 <- 0, 1; slots 2q+8, 2q+9 <- 2, 3), step 1 elements 4-7.
// Result fragment per thread: c[0], c[1] = (row g, cols 2q, 2q+1); c[2], c[3] = (row g + 8, cols 2q, 2q+1).
#pragma once

#include "kernels/device_common.cuh"
#include "kernels/pdl.cuh"

namespace tpserve::kernels {

inline constexpr int kMmaRows = 16;  // rows of A per warp tile
inline constexpr int kMmaCols = 8;   // columns of B per n-tile
inline constexpr int kMmaK = 32;     // k per block (two m16n8k16 steps)

__device__ __forceinline__ void mma_bf16_16816(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                               uint32_t a3, uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// (a, b) as bf16 pairs hi + lo, so that an mma operand keeps about 16 bits: hi = bf16(a, b), lo = bf16 of
// what hi leaves out (low half: a).
__device__ __forceinline__ void split_bf16x2(float a, float b, uint32_t& hi, uint32_t& lo) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
  const float2 back = __bfloat1622float2(h);
  hi = *reinterpret_cast<const uint32_t*>(&h);
  lo = pack_bf16x2(a - back.x, b - back.y);
}

// Four 8x8 b16 matrices from shared memory (ldmatrix): lane t gives the address of row t % 8 of matrix t / 8
// (16 contiguous bytes); r[i] receives, of matrix i, row lane / 4, columns 2 (lane % 4) and + 1 (trans: row
// and column swapped), the fragment layout of mma.sync's operands.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* row) {
  const uint32_t at = shared_address(row);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(at));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* row) {
  const uint32_t at = shared_address(row);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(at));
}

// One 32-wide k block: a_lo / a_hi are this thread's 16 bytes of rows g and g + 8, b of its column.
__device__ __forceinline__ void mma_k32(float (&c)[4], const uint4& a_lo, const uint4& a_hi, const uint4& b) {
  mma_bf16_16816(c, a_lo.x, a_hi.x, a_lo.y, a_hi.y, b.x, b.y);
  mma_bf16_16816(c, a_lo.z, a_hi.z, a_lo.w, a_hi.w, b.z, b.w);
}

// b[nt]: row token (= nt * 8 + g) of x ([tokens][k] in global memory), or nullptr for tokens >= `tokens`: the
// B operand of warp_tile_mma (or mma_staged) read from global memory.
template <int NT>
__device__ __forceinline__ void global_token_columns(const bf16* x, int k, int tokens, const bf16* (&b)[NT]) {
  const int g = threadIdx.x % kWarpSize / 4;
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    const int token = nt * kMmaCols + g;
    b[nt] = token < tokens ? x + static_cast<int64_t>(token) * k : nullptr;
  }
}

// Accumulates the tile over k blocks [kb_begin, kb_end) of a K-long dot product (K a multiple of 8; the
// tail block is zero-padded). a_lo / a_hi: this thread's A rows (g, g + 8), nullptr = a zero row.
// b[nt]: its B column nt * 8 + g, nullptr = a zero column. With kWaitInside, the first A loads (weights,
// written before the step) are issued before pdl_wait(), so they overlap the predecessor's tail; B is only
// read after it.
template <int NT, int kUnroll, bool kWaitInside>
__device__ __forceinline__ void warp_tile_mma(float (&acc)[NT][4], const bf16* a_lo, const bf16* a_hi,
                                              const bf16* const (&b)[NT], int k, int kb_begin, int kb_end) {
  const int q = (threadIdx.x % kWarpSize) % 4;
  const uint4 zero = make_uint4(0, 0, 0, 0);
  uint4 ra_lo[kUnroll], ra_hi[kUnroll];
  auto load_a = [&](int kb0) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int at = (kb0 + u) * kMmaK + q * kBf16PerVec;
      const bool valid = kb0 + u < kb_end && at < k;
      ra_lo[u] = valid && a_lo != nullptr ? load_vec(a_lo + at) : zero;
      ra_hi[u] = valid && a_hi != nullptr ? load_vec(a_hi + at) : zero;
    }
  };
  load_a(kb_begin);
  if constexpr (kWaitInside) pdl_wait_then_trigger();
  for (int kb0 = kb_begin; kb0 < kb_end; kb0 += kUnroll) {
    if (kb0 != kb_begin) load_a(kb0);
    uint4 rb[kUnroll][NT];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int at = (kb0 + u) * kMmaK + q * kBf16PerVec;
      const bool valid = kb0 + u < kb_end && at < k;
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) rb[u][nt] = valid && b[nt] != nullptr ? load_vec(b[nt] + at) : zero;
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) mma_k32(acc[nt], ra_lo[u], ra_hi[u], rb[u][nt]);
  }
}

// Splits `blocks` k blocks into `parts` contiguous ranges; returns range `part` as [begin, end).
__device__ __forceinline__ void split_range(int blocks, int parts, int part, int& begin, int& end) {
  const int per = (blocks + parts - 1) / parts;
  begin = min(blocks, part * per);
  end = min(blocks, begin + per);
}

// Floats of shared memory reduce_warp_tiles needs for `warps` warps of NT n-tiles.
__host__ __device__ constexpr size_t warp_tiles_scratch_floats(int warps, int nt) {
  return static_cast<size_t>(warps) * nt * 4 * kWarpSize;
}

// Sums the warps' tiles in groups of `group` consecutive warps (the block's warps a multiple of it), in a
// fixed order (deterministic); afterwards the first warp of each group holds its group's total in acc.
// scratch: warp_tiles_scratch_floats(warps, NT) floats of shared memory.
template <int NT>
__device__ __forceinline__ void reduce_warp_tiles(float (&acc)[NT][4], float* scratch, int group) {
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  if (group == 1) return;
  auto slot = [&](int w, int nt, int i) { return ((w * NT + nt) * 4 + i) * kWarpSize + lane; };
  if (warp % group > 0) {
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) scratch[slot(warp, nt, i)] = acc[nt][i];
  }
  __syncthreads();
  if (warp % group == 0) {
    for (int w = warp + 1; w < warp + group; ++w)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[nt][i] += scratch[slot(w, nt, i)];
  }
}

}  // namespace tpserve::kernels
