// Device pieces the GEMV kernels share (kernels/gemv.cu, kernels/gemv_staged.cu): storing a summed tile, and
// the in-kernel RMSNorm that computes a GEMV's activations (GemvNormParams, kernels/gemv.h).
#pragma once

#include <type_traits>

#include "kernels/device_common.cuh"
#include "kernels/gemv.h"
#include "kernels/mma_tile.cuh"

namespace tpserve::kernels {

// Warp 0's summed tile into out (rows row_lo / row_hi of this thread, columns = tokens).
template <int NT, typename Out>
__device__ __forceinline__ void store_tile(const GemvParams& p, const float (&acc)[NT][4], int row_lo,
                                           int row_hi, int q) {
  Out* out =
      std::is_same_v<Out, float> ? reinterpret_cast<Out*>(p.out_f32) : reinterpret_cast<Out*>(p.out_bf16);
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int token = nt * kMmaCols + 2 * q + (i & 1);
      const int row = i < 2 ? row_lo : row_hi;
      if (token < p.m && row < p.n) {
        if constexpr (std::is_same_v<Out, float>)
          out[static_cast<int64_t>(token) * p.n + row] = acc[nt][i];
        else
          out[static_cast<int64_t>(token) * p.n + row] = __float2bfloat16(acc[nt][i]);
      }
    }
}

// bf16 of padding per shared row: consecutive rows start 64 bytes apart in the banks, so the 8 threads of a
// 128-byte wavefront (two rows x four 16-byte pieces) hit distinct banks.
inline constexpr int kNormRowPad = 32;

// Before pdl_wait(): the norm weight (a weight: no predecessor writes it) into L2, so that
// norm_rows_to_shared() does not wait for HBM after the barrier.
__device__ inline void prefetch_norm_weight(const GemvNormParams& n, int k) {
  constexpr int kLineElems = 128 / sizeof(bf16);
  for (int at = threadIdx.x * kLineElems; at < k; at += blockDim.x * kLineElems)
    asm volatile("prefetch.global.L2 [%0];\n" ::"l"(n.norm_weight + at));
}

// Rows of x = rmsnorm(residual [+ add]) * w into x_s ([M][K + pad] bf16), with kernels/rmsnorm.h's
// arithmetic (the residual rounded to bf16 before its squares are summed); then a barrier. This runs after
// pdl_wait(), on the kernel's critical path: each row is split over a group of warps and every lane issues
// its loads before using any, so the inputs cost about one round trip to L2; the group's partial sums of
// squares meet in shared memory in a fixed order (deterministic).
inline constexpr int kNormMaxRows = 16, kNormMaxWarps = 32, kNormPieces = 2;
__device__ inline void norm_rows_to_shared(const GemvParams& p, const GemvNormParams& n, bf16* x_s) {
  __shared__ float sums_s[kNormMaxRows][kNormMaxWarps];
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize, warps = blockDim.x / kWarpSize;
  const int group = max(1, warps / p.m), rows_a_pass = warps / group, member = warp % group;
  const int vectors = p.k / kBf16PerVec, stride = p.k + kNormRowPad;
  const int per_warp = (vectors + group - 1) / group, first = member * per_warp;
  const int last = min(vectors, first + per_warp);
  for (int r = warp / group; r < p.m && warp < rows_a_pass * group; r += rows_a_pass) {
    const int64_t base = static_cast<int64_t>(r) * p.k;
    bf16* row = x_s + r * stride;
    float sum_sq = 0.0f;
    for (int v0 = first; v0 < last; v0 += kWarpSize * kNormPieces) {
      uint4 res[kNormPieces], add[kNormPieces];
#pragma unroll
      for (int j = 0; j < kNormPieces; ++j) {  // every load first
        const int vec = v0 + lane + j * kWarpSize;
        if (vec < last) {
          res[j] = load_vec(n.residual + base + vec * kBf16PerVec);
          if (n.add != nullptr) add[j] = load_vec(n.add + base + vec * kBf16PerVec);
        }
      }
#pragma unroll
      for (int j = 0; j < kNormPieces; ++j) {
        const int vec = v0 + lane + j * kWarpSize;
        if (vec >= last) continue;
        float v[kBf16PerVec];
        uint4 piece = res[j];
        unpack_bf16x8(piece, v);
        if (n.add != nullptr) {
          float a[kBf16PerVec];
          unpack_bf16x8(add[j], a);
#pragma unroll
          for (int i = 0; i < kBf16PerVec; ++i) v[i] += a[i];
          piece = pack_bf16x8(v);
          unpack_bf16x8(piece, v);  // normalise the stored (rounded) residual
        }
        store_vec(row + vec * kBf16PerVec, piece);
#pragma unroll
        for (int i = 0; i < kBf16PerVec; ++i) sum_sq += v[i] * v[i];
      }
    }
    sum_sq = warp_sum(sum_sq);
    if (lane == 0) sums_s[r][member] = sum_sq;
  }
  __syncthreads();
  for (int r = warp / group; r < p.m && warp < rows_a_pass * group; r += rows_a_pass) {
    float total = 0.0f;
    for (int m = 0; m < group; ++m) total += sums_s[r][m];
    const float inv = 1.0f / sqrtf(total / static_cast<float>(p.k) + n.eps);
    bf16* row = x_s + r * stride;
    for (int v0 = first; v0 < last; v0 += kWarpSize * kNormPieces) {  // this warp's pieces, in place
      uint4 xs[kNormPieces], ws[kNormPieces];
#pragma unroll
      for (int j = 0; j < kNormPieces; ++j) {  // every load first
        const int vec = v0 + lane + j * kWarpSize;
        if (vec < last) {
          xs[j] = load_vec(row + vec * kBf16PerVec);
          ws[j] = load_vec(n.norm_weight + vec * kBf16PerVec);
        }
      }
#pragma unroll
      for (int j = 0; j < kNormPieces; ++j) {
        const int vec = v0 + lane + j * kWarpSize;
        if (vec >= last) continue;
        float v[kBf16PerVec], w[kBf16PerVec], y[kBf16PerVec];
        unpack_bf16x8(xs[j], v);
        unpack_bf16x8(ws[j], w);
#pragma unroll
        for (int i = 0; i < kBf16PerVec; ++i) y[i] = w[i] * (v[i] * inv);
        store_vec(row + vec * kBf16PerVec, pack_bf16x8(y));
      }
    }
  }
  __syncthreads();
}

// normed = the shared rows (every block holds all of them): block b writes the pieces b, b + blocks, ...
__device__ inline void write_normed_share(const GemvParams& p, const GemvNormParams& n, const bf16* x_s) {
  const int vectors = p.k / kBf16PerVec, stride = p.k + kNormRowPad;
  for (int i = blockIdx.x + threadIdx.x * gridDim.x; i < p.m * vectors; i += blockDim.x * gridDim.x) {
    const int r = i / vectors, vec = i % vectors;
    store_vec(n.normed + static_cast<int64_t>(r) * p.k + vec * kBf16PerVec,
              load_vec(x_s + r * stride + vec * kBf16PerVec));
  }
}

// After norm_rows_to_shared(), every thread of the block: whether this block is the last to have read the
// inputs. With add, the residual is updated in place, so only once every block has read it: this block has
// (norm_rows_to_shared's barrier orders its threads' reads), and the last to arrive writes it. The counter is
// left at zero for the next launch.
__device__ inline bool arrive_after_reading_inputs(const GemvNormParams& n) {
  __shared__ bool last_s;
  if (threadIdx.x == 0) {
    last_s = false;
    if (n.add != nullptr) {
      __threadfence();
      last_s = atomicAdd(n.arrivals, 1) == static_cast<int>(gridDim.x) - 1;
      if (last_s) atomicExch(n.arrivals, 0);  // every block has arrived
      __threadfence();
    }
  }
  __syncthreads();
  return last_s;
}

// The last block to have read the inputs: residual += add, rounded as the rows were computed.
__device__ inline void write_residual(const GemvParams& p, const GemvNormParams& n) {
  const int vectors = p.k / kBf16PerVec;
  for (int i = threadIdx.x; i < p.m * vectors; i += blockDim.x) {
    const int64_t at = static_cast<int64_t>(i / vectors) * p.k + (i % vectors) * kBf16PerVec;
    float v[kBf16PerVec], a[kBf16PerVec];
    unpack_bf16x8(load_vec(n.residual + at), v);
    unpack_bf16x8(load_vec(n.add + at), a);
#pragma unroll
    for (int j = 0; j < kBf16PerVec; ++j) v[j] += a[j];
    store_vec(n.residual + at, pack_bf16x8(v));
  }
}

}  // namespace tpserve::kernels
