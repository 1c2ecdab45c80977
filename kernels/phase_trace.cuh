// Device side of the phase marks (kernels/phase_trace.h). A traced kernel's .cu file says
// TPS_PHASE_TRACE_DEFINE(buffer, kernel) once per traced kernel at namespace tpserve::kernels scope (its
// buffer, named so that one file may trace several kernels, and its address for the host), and at its marks
// TPS_PHASE_MARK(buffer, i), or TPS_PHASE_MARK_AFTER_BLOCK(buffer, i) where the mark must follow every
// thread's work so far (a block barrier first: every thread of the block must reach it). Without
// -DTPSERVE_PHASE_TRACE=ON all expand to nothing.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "common/cuda_check.h"
#include "kernels/phase_trace.h"

namespace tpserve::kernels::phase_trace_detail {

__device__ __forceinline__ void mark(PhaseMark* buffer, int i) {
  if (threadIdx.x != 0) return;
  const int block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  if (block >= kPhaseTraceBlocks) return;
  uint64_t ns;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns)::"memory");
  buffer[block * kPhaseTraceMarks + i] = PhaseMark{ns, clock64(), gridDim.x * gridDim.y * gridDim.z};
}

}  // namespace tpserve::kernels::phase_trace_detail

#if defined(TPSERVE_PHASE_TRACE)
#define TPS_PHASE_TRACE_DEFINE(buffer, K)                                   \
  namespace phase_trace_detail {                                            \
  static __device__ PhaseMark buffer[kPhaseTraceBlocks * kPhaseTraceMarks]; \
  template <>                                                               \
  PhaseMark* buffer_address<K>() {                                          \
    void* address = nullptr;                                                \
    CUDA_CHECK(cudaGetSymbolAddress(&address, buffer));                     \
    return static_cast<PhaseMark*>(address);                                \
  }                                                                         \
  }
#define TPS_PHASE_MARK(buffer, i) \
  ::tpserve::kernels::phase_trace_detail::mark(phase_trace_detail::buffer, (i))
#define TPS_PHASE_MARK_AFTER_BLOCK(buffer, i) \
  do {                                        \
    __syncthreads();                          \
    TPS_PHASE_MARK(buffer, i);                \
  } while (0)
#else
#define TPS_PHASE_TRACE_DEFINE(buffer, K)
#define TPS_PHASE_MARK(buffer, i) ((void)0)
#define TPS_PHASE_MARK_AFTER_BLOCK(buffer, i) ((void)0)
#endif
