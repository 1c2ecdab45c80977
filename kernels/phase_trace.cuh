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

// Thread 0 of the block records mark i; at mark 0 (the entry) it also decides whether this launch records
// (PhaseTraceControl) and keeps the answer in shared memory for the block's later marks.
__device__ __forceinline__ void mark(PhaseMark* buffer, PhaseTraceControl* control, int i) {
  if (threadIdx.x != 0) return;
  __shared__ bool recording;
  const uint32_t grid = gridDim.x * gridDim.y * gridDim.z;
  if (i == 0) {
    const int launch = control->launch;
    recording = launch < 0 || atomicAdd(&control->blocks_entered, 1u) / grid == static_cast<uint32_t>(launch);
  }
  if (!recording) return;
  const int block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  if (block >= kPhaseTraceBlocks) return;
  uint64_t ns;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns)::"memory");
  buffer[block * kPhaseTraceMarks + i] = PhaseMark{ns, clock64(), grid};
}

}  // namespace tpserve::kernels::phase_trace_detail

#if defined(TPSERVE_PHASE_TRACE)
#define TPS_PHASE_TRACE_DEFINE(buffer, K)                                              \
  namespace phase_trace_detail {                                                       \
  static __device__ PhaseMark buffer[kPhaseTraceBlocks * kPhaseTraceMarks];            \
  static __device__ PhaseTraceControl buffer##_control;                                \
  template <>                                                                          \
  TraceAddresses trace_addresses<K>() {                                                \
    void* marks = nullptr;                                                             \
    void* control = nullptr;                                                           \
    CUDA_CHECK(cudaGetSymbolAddress(&marks, buffer));                                  \
    CUDA_CHECK(cudaGetSymbolAddress(&control, buffer##_control));                      \
    return {static_cast<PhaseMark*>(marks), static_cast<PhaseTraceControl*>(control)}; \
  }                                                                                    \
  }
#define TPS_PHASE_MARK(buffer, i)                                          \
  ::tpserve::kernels::phase_trace_detail::mark(phase_trace_detail::buffer, \
                                               &phase_trace_detail::buffer##_control, (i))
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
