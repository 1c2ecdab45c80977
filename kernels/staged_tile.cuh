// Weight rows staged in shared memory for a warp's 16-row tensor-core tile (kernels/mma_tile.cuh): the warp
// issues asynchronous 16-byte copies (cp.async, no registers held while they fly) of exactly the pieces it
// will read, so that a kernel can request its whole weight tile before its PDL wait and only then read the
// predecessor's activations. Used by the staged GEMV (kernels/gemv_staged.cu) and the staged MoE expert
// kernels (kernels/moe_experts.cu).
//
// Shared rows are K + kStagedRowPad bf16 long: where K is a multiple of 64, consecutive rows start 64 bytes
// apart in the banks, so the 8 threads of a 128-byte wavefront (two rows x four 16-byte pieces) hit distinct
// banks (K = 32 mod 64 leaves 2-way conflicts: correct, slower; no Qwen3 projection has such a K).
#pragma once

#include "kernels/device_common.cuh"
#include "kernels/mma_tile.cuh"

namespace tpserve::kernels {

inline constexpr int kStagedRowPad = 32;

// Bytes of one staged 16-row tile for a K-long dot product.
__host__ __device__ inline size_t staged_tile_bytes(int k) {
  return static_cast<size_t>(kMmaRows) * (k + kStagedRowPad) * sizeof(bf16);
}

// Copies k blocks [kb0, kb1) of the tile's 16 rows into tile ([16][row_elems] bf16) as one commit group.
// row_ptr(r): row r's first element in global memory, or nullptr for a row that is zero-filled (never read
// from global; `any_row` stands in as the unused source address). Consecutive lanes take consecutive
// 16-byte pieces of a row. hint: the copies' L2 cache hint (stream_hint).
template <typename RowPtr>
__device__ __forceinline__ void copy_rows_async(bf16* tile, int row_elems, const RowPtr& row_ptr,
                                                const bf16* any_row, int kb0, int kb1, StreamHint hint) {
  const int lane = threadIdx.x % kWarpSize;
  const int vecs = (kb1 - kb0) * (kMmaK / kBf16PerVec);  // pieces a row
  for (int i = lane; i < kMmaRows * vecs; i += kWarpSize) {
    const int r = i / vecs, at = kb0 * kMmaK + (i % vecs) * kBf16PerVec;
    const bf16* src = row_ptr(r);
    cp_async_16(tile + r * row_elems + at, src != nullptr ? src + at : any_row, src != nullptr, hint);
  }
  cp_async_commit();
}

// b[nt]: the shared-memory row (row_elems bf16 apart) of token column nt * 8 + g, or nullptr (a zero column)
// for tokens >= `tokens`: the B operand of mma_staged when the activations sit in shared memory.
template <int NT>
__device__ __forceinline__ void shared_token_columns(const bf16* x_s, int row_elems, int tokens,
                                                     const bf16* (&b)[NT]) {
  const int g = threadIdx.x % kWarpSize / 4;
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
    b[nt] = nt * kMmaCols + g < tokens ? x_s + (nt * kMmaCols + g) * row_elems : nullptr;
}

// acc += the warp's tile over k blocks [kb0, kb1): A from the staged tile (its copies complete and visible
// to the warp), B column nt * 8 + g from b[nt] (global or shared memory; nullptr = a zero column). The B
// pieces of kUnroll k blocks are loaded before their products (B in global memory: kUnroll * NT loads in
// flight a thread, 4 in the staged GEMV; B in shared memory: 1, the loop itself unrolled 4 times).
template <int NT, int kUnroll>
__device__ __forceinline__ void mma_staged(float (&acc)[NT][4], const bf16* tile, int row_elems,
                                           const bf16* const (&b)[NT], int kb0, int kb1) {
  const int lane = threadIdx.x % kWarpSize, g = lane / 4, q = lane % 4;
  const uint4 zero = make_uint4(0, 0, 0, 0);
  const bf16* a_lo = tile + g * row_elems + q * kBf16PerVec;
  const bf16* a_hi = a_lo + 8 * row_elems;
#pragma unroll(kUnroll == 1 ? 4 : 1)
  for (int kb00 = kb0; kb00 < kb1; kb00 += kUnroll) {
    uint4 rb[kUnroll][NT];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
        rb[u][nt] = kb00 + u < kb1 && b[nt] != nullptr
                        ? load_vec(b[nt] + (kb00 + u) * kMmaK + q * kBf16PerVec)
                        : zero;
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (kb00 + u >= kb1) break;
      const int at = (kb00 + u) * kMmaK;
      const uint4 lo = load_vec(a_lo + at), hi = load_vec(a_hi + at);
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) mma_k32(acc[nt], lo, hi, rb[u][nt]);
    }
  }
}

// mma_staged for one token column, where the warp has at most kMaxKb k blocks: B's pieces of all of them are
// loaded into registers first, then `landed()` waits for the staged tile's copies, then the products (the
// same products in the same order as mma_staged's): B's trip to memory overlaps A's landing.
template <int kMaxKb, typename Landed>
__device__ __forceinline__ void mma_staged_b_first(float (&acc)[1][4], const bf16* tile, int row_elems,
                                                   const bf16* b, int kb0, int kb1, Landed&& landed) {
  const int lane = threadIdx.x % kWarpSize, g = lane / 4, q = lane % 4;
  uint4 rb[kMaxKb];
#pragma unroll
  for (int u = 0; u < kMaxKb; ++u)
    rb[u] = kb0 + u < kb1 && b != nullptr ? load_vec(b + (kb0 + u) * kMmaK + q * kBf16PerVec)
                                          : make_uint4(0, 0, 0, 0);
  landed();
  const bf16* a_lo = tile + g * row_elems + q * kBf16PerVec;
  const bf16* a_hi = a_lo + 8 * row_elems;
#pragma unroll
  for (int u = 0; u < kMaxKb; ++u) {
    if (kb0 + u >= kb1) break;
    const int at = (kb0 + u) * kMmaK;
    mma_k32(acc[0], load_vec(a_lo + at), load_vec(a_hi + at), rb[u]);
  }
}

}  // namespace tpserve::kernels
