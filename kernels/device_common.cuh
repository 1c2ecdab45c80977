// Small device helpers shared by the kernels: 16-byte bf16 vectors, warp reductions, cp.async.
// Plain loads only (no __ldg): kernels read predecessor output under PDL.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/kernel_api.h"

namespace tpserve::kernels {

inline constexpr int kWarpSize = 32;
inline constexpr int kBf16PerVec = 8;  // bf16 values in one 16-byte vector

__device__ __forceinline__ uint4 load_vec(const void* p) {
  return *reinterpret_cast<const uint4*>(p);
}
__device__ __forceinline__ void store_vec(void* p, const uint4& v) {
  *reinterpret_cast<uint4*>(p) = v;
}

// 8 bf16 in a 16-byte vector <-> 8 floats.
__device__ __forceinline__ void unpack_bf16x8(const uint4& v, float (&f)[8]) {
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    f[2 * i] = __uint_as_float(w[i] << 16);
    f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
  }
}

__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&h);
}

__device__ __forceinline__ uint4 pack_bf16x8(const float (&f)[8]) {
  return make_uint4(pack_bf16x2(f[0], f[1]), pack_bf16x2(f[2], f[3]), pack_bf16x2(f[4], f[5]),
                    pack_bf16x2(f[6], f[7]));
}

// silu(g) = g * sigmoid(g).
__device__ __forceinline__ float silu(float g) {
  return g / (1.0f + expf(-g));
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// Sum over the block; `scratch` holds one float per warp. Every thread gets the result.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int warps = (blockDim.x + kWarpSize - 1) / kWarpSize;
  v = warp_sum(v);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float total = 0.0f;
  for (int w = 0; w < warps; ++w) total += scratch[w];
  return total;
}

// Exclusive prefix sum of one int per thread over a block of kThreads threads; `total` gets the block's sum.
// warp_totals: kThreads / 32 ints of shared memory. Every thread must call it.
template <int kThreads>
__device__ __forceinline__ int block_exclusive_scan(int value, int* warp_totals, int& total) {
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  int inclusive = value;
#pragma unroll
  for (int offset = 1; offset < kWarpSize; offset *= 2) {
    const int other = __shfl_up_sync(0xffffffffu, inclusive, offset);
    if (lane >= offset) inclusive += other;
  }
  if (lane == kWarpSize - 1) warp_totals[warp] = inclusive;
  __syncthreads();
  int before = 0;
  total = 0;
#pragma unroll
  for (int w = 0; w < kThreads / kWarpSize; ++w) {
    if (w < warp) before += warp_totals[w];
    total += warp_totals[w];
  }
  __syncthreads();  // warp_totals may be reused right away
  return before + inclusive - value;
}

// A shared-memory pointer as the 32-bit shared-window address PTX's .shared operands take.
__device__ __forceinline__ uint32_t shared_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// How a kernel copies data the step reads once (weights) into shared memory: under the L2 evict_first cache
// policy (`on`), so that streaming a layer's weights through L2 evicts those lines before what the step's
// small kernels read again (their code, activations, routing, step inputs); else plain copies, no policy
// (runtime.weights_l2_evict_first). The choice is uniform over a launch. Only copies (cp.async, bulk) take
// it: register loads under the hint (ld.global.cs, or .L2::cache_hint) measured slower (docs/PERF.md,
// twentieth session).
struct StreamHint {
  uint64_t policy = 0;  // createpolicy's value, where on
  bool on = false;
};
__device__ __forceinline__ StreamHint stream_hint(bool evict_first) {
  StreamHint h;
  h.on = evict_first;
  if (evict_first) asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(h.policy));
  return h;
}

// 16-byte asynchronous copy global -> shared; `valid` false zero-fills the destination without reading.
// hint: the copy's L2 cache hint (none by default).
__device__ __forceinline__ void cp_async_16(void* smem_dst, const void* global_src, bool valid,
                                            StreamHint hint = {}) {
  const uint32_t dst = shared_address(smem_dst);
  const int src_bytes = valid ? 16 : 0;
  if (hint.on)
    asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2, %3;\n" ::"r"(dst),
                 "l"(global_src), "r"(src_bytes), "l"(hint.policy)
                 : "memory");
  else
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(global_src), "r"(src_bytes)
                 : "memory");
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
__device__ __forceinline__ void cp_async_wait_all() {
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");
}
// Waits for all committed groups but the most recent one.
__device__ __forceinline__ void cp_async_wait_one() {
  asm volatile("cp.async.wait_group 1;\n" ::: "memory");
}
// Waits until at most n (0..3; more counts as 3) of this thread's committed groups are still in flight.
__device__ __forceinline__ void cp_async_wait_pending(int n) {
  switch (n) {
    case 0:
      asm volatile("cp.async.wait_group 0;\n" ::: "memory");
      break;
    case 1:
      asm volatile("cp.async.wait_group 1;\n" ::: "memory");
      break;
    case 2:
      asm volatile("cp.async.wait_group 2;\n" ::: "memory");
      break;
    default:
      asm volatile("cp.async.wait_group 3;\n" ::: "memory");
      break;
  }
}

}  // namespace tpserve::kernels
