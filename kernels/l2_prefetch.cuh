// Prefetching a byte range into L2 from every block of a grid: each block issues its slice with one
// thread's cp.async.bulk.prefetch.L2 instructions (SM90+; nothing below). A hint: no register, no shared
// memory, no completion to wait for, and no effect on results.
#pragma once

#include <cstdint>

namespace tpserve::kernels {

inline constexpr int64_t kL2PrefetchPiece = int64_t(1) << 16;  // bytes per prefetch instruction

// Block `part` of `parts` prefetches its slice of [base, base + bytes) (base 16-byte aligned, bytes a
// multiple of 16; slices of whole 16-byte pieces). Thread 0 of the block issues it.
__device__ __forceinline__ void prefetch_l2_slice(const void* base, int64_t bytes, int64_t part,
                                                  int64_t parts) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (base == nullptr || bytes <= 0 || threadIdx.x != 0) return;
  const int64_t pieces16 = bytes / 16, per = (pieces16 + parts - 1) / parts;
  const int64_t begin = part * per * 16, end = min(bytes, begin + per * 16);
  const char* p = static_cast<const char*>(base);
  for (int64_t at = begin; at < end; at += kL2PrefetchPiece) {
    const uint32_t size = static_cast<uint32_t>(min(kL2PrefetchPiece, end - at));
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p + at), "r"(size) : "memory");
  }
#endif
}

}  // namespace tpserve::kernels
