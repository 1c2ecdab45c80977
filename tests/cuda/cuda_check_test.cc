// CUDA_CHECK / CUBLAS_CHECK turn a failed status into tpserve::Error with the error name and the call text.
// Needs no GPU: it runs on every CUDA build.
#include <gtest/gtest.h>

#include <string>

#include "common/cuda_check.h"
#include "common/error.h"

namespace tpserve {
namespace {

cudaError_t failing_cuda_call() {
  return cudaErrorInvalidValue;
}
cublasStatus_t failing_cublas_call() {
  return CUBLAS_STATUS_INVALID_VALUE;
}

TEST(CudaCheck, ThrowsWithErrorNameAndCallText) {
  try {
    CUDA_CHECK(failing_cuda_call());
    FAIL() << "CUDA_CHECK did not throw";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("cudaErrorInvalidValue"), std::string::npos) << what;
    EXPECT_NE(what.find("failing_cuda_call()"), std::string::npos) << what;
    EXPECT_NE(what.find("cuda_check_test.cc"), std::string::npos) << what;
  }
}

TEST(CudaCheck, PassesSuccessThrough) {
  EXPECT_NO_THROW(CUDA_CHECK(cudaSuccess));
}

TEST(CudaCheck, CublasStatusNamed) {
  try {
    CUBLAS_CHECK(failing_cublas_call());
    FAIL() << "CUBLAS_CHECK did not throw";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("CUBLAS_STATUS_INVALID_VALUE"), std::string::npos) << what;
    EXPECT_NE(what.find("failing_cublas_call()"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace tpserve
