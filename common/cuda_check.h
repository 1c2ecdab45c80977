// CUDA_CHECK / CUBLAS_CHECK: throw tpserve::Error with the call text, the library's error name, file and
// line.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <string>

#include "common/error.h"

namespace tpserve {
inline std::string cuda_error_text(cudaError_t e) {
  return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
}
inline std::string cublas_error_text(cublasStatus_t s) {
  return std::string(cublasLtGetStatusName(s)) + ": " + cublasLtGetStatusString(s);
}
}  // namespace tpserve

#define CUDA_CHECK(call)                                                                          \
  do {                                                                                            \
    const cudaError_t tps_cuda_rc_ = (call);                                                      \
    if (tps_cuda_rc_ != cudaSuccess)                                                              \
      ::tpserve::fail_check(#call, ::tpserve::cuda_error_text(tps_cuda_rc_), __FILE__, __LINE__); \
  } while (0)

#define CUBLAS_CHECK(call)                                                                            \
  do {                                                                                                \
    const cublasStatus_t tps_cublas_rc_ = (call);                                                     \
    if (tps_cublas_rc_ != CUBLAS_STATUS_SUCCESS)                                                      \
      ::tpserve::fail_check(#call, ::tpserve::cublas_error_text(tps_cublas_rc_), __FILE__, __LINE__); \
  } while (0)
