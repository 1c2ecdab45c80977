// Device side of the phase marks (kernels/phase_trace.h). A traced kernel's .cu file says
// TPS_PHASE_TRACE_DEFINE(buffer, kernel) once per traced kernel at namespace tpserve::kernels scope (its
// buffer, named so that one file may trace several kernels, and host access) and TPS_PHASE_MARK(buffer, i)
// at its marks; without -DTPSERVE_PHASE_TRACE=ON both expand to nothing.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "common/cuda_check.h"
#include "kernels/phase_trace.h"

namespace tpserve::kernels::phase_trace_detail {

__device__ __forceinline__ void mark(PhaseMark* buffer, int i) {
  if (threadIdx.x != 0) return;
  const int block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  if (block >= kPhaseTraceBlocks) return;
  uint64_t ns;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns)::"memory");
  buffer[block * kPhaseTraceMarks + i] = PhaseMark{ns, clock64(), gridDim.x * gridDim.y * gridDim.z, 0};
}

}  // namespace tpserve::kernels::phase_trace_detail

#if defined(TPSERVE_PHASE_TRACE)
#define TPS_PHASE_TRACE_DEFINE(buffer, K)                                                 \
  namespace phase_trace_detail {                                                          \
  static __device__ PhaseMark buffer[kPhaseTraceBlocks * kPhaseTraceMarks];               \
  template <>                                                                             \
  std::vector<PhaseMark> read<K>() {                                                      \
    std::vector<PhaseMark> out(kPhaseTraceBlocks* kPhaseTraceMarks);                      \
    CUDA_CHECK(cudaDeviceSynchronize());                                                  \
    CUDA_CHECK(cudaMemcpyFromSymbol(out.data(), buffer, out.size() * sizeof(PhaseMark))); \
    return out;                                                                           \
  }                                                                                       \
  template <>                                                                             \
  void clear<K>() {                                                                       \
    const std::vector<PhaseMark> zero(kPhaseTraceBlocks* kPhaseTraceMarks);               \
    CUDA_CHECK(cudaMemcpyToSymbol(buffer, zero.data(), zero.size() * sizeof(PhaseMark))); \
  }                                                                                       \
  }
#define TPS_PHASE_MARK(buffer, i) \
  ::tpserve::kernels::phase_trace_detail::mark(phase_trace_detail::buffer, (i))
#else
#define TPS_PHASE_TRACE_DEFINE(buffer, K)
#define TPS_PHASE_MARK(buffer, i) ((void)0)
#endif
