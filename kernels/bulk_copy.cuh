// Bulk copies from global to shared memory by the SM's copy engine (cp.async.bulk, SM90+), each completing
// on an mbarrier: one instruction moves a whole contiguous piece, where 16-byte loads or cp.async need one
// request a lane. Below SM90 these compile to nothing: hosts take such paths only on SM90+ devices for
// kernels compiled for SM90+ (e.g. moe_gate_up_bulk_available).
#pragma once

#include <cstdint>

#include "kernels/device_common.cuh"

namespace tpserve::kernels {

// One thread: the barrier expects one arrival per phase; the init is made visible to the copy engine.
__device__ __forceinline__ void mbarrier_init(uint64_t* bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(shared_address(bar)) : "memory");
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#endif
}

// The arrival of the barrier's current phase, which then also waits for `bytes` of copies to land.
__device__ __forceinline__ void mbarrier_arrive_expect(uint64_t* bar, uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(shared_address(bar)), "r"(bytes)
               : "memory");
#endif
}

// Copies `bytes` (a multiple of 16; both addresses 16-byte aligned) from src to dst, counted on bar, under
// the stream hint (kernels/device_common.cuh stream_hint).
__device__ __forceinline__ void bulk_copy_to_shared(void* dst, const void* src, uint32_t bytes, uint64_t* bar,
                                                    StreamHint hint) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (hint.on)
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
        " [%0], [%1], %2, [%3], %4;" ::"r"(shared_address(dst)),
        "l"(src), "r"(bytes), "r"(shared_address(bar)), "l"(hint.policy)
        : "memory");
  else
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
            shared_address(dst)),
        "l"(src), "r"(bytes), "r"(shared_address(bar))
        : "memory");
#endif
}

// Waits until the barrier's phase of parity `parity` (0, 1, 0, ...) has completed.
__device__ __forceinline__ void mbarrier_wait(uint64_t* bar, uint32_t parity) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  uint32_t done = 0;
  while (!done)
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, "
        "p;\n}\n"
        : "=r"(done)
        : "r"(shared_address(bar)), "r"(parity)
        : "memory");
#endif
}

}  // namespace tpserve::kernels
