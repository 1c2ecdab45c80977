// Helpers for the CUDA op tests: the CPU and CUDA backends side by side, tensors holding the same values on
// both (bf16 inputs rounded first, so both see the same numbers), poisoned outputs, and a tolerance check
// atol + rtol * |ref| that requires NaN/Inf at the same positions and prints only the first mismatches.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "runtime/backend/backend.h"
#include "runtime/backend/cuda/cuda_backend.h"

// Skips the test when no GPU is visible (CI machines have the toolkit but no device).
#define TPS_REQUIRE_CUDA_DEVICE()                                                                     \
  do {                                                                                                \
    std::string tps_why_;                                                                             \
    if (::tpserve::cuda_device_count(&tps_why_) == 0) GTEST_SKIP() << "no CUDA device: " << tps_why_; \
  } while (0)

namespace tpserve::cuda_test {

struct Pair {
  Tensor cpu;  // f32 (or i32 / i64) on the CPU reference backend
  Tensor gpu;  // bf16 / f32 / i32 / i64 on the CUDA backend
};

// The CUDA backend options of the op tests: a small arena (tests allocate per case and never free), every
// GEMV shape reachable by configuration (gemv_max_rows at its limit).
CudaBackendOptions test_backend_options(size_t arena_bytes = size_t(1) << 30,
                                        size_t workspace_bytes = size_t(256) << 20);

class Backends {
 public:
  // A fresh CUDA backend with test_backend_options(arena_bytes, workspace_bytes), or with `options`.
  explicit Backends(size_t arena_bytes = size_t(1) << 30, size_t workspace_bytes = size_t(256) << 20);
  explicit Backends(const CudaBackendOptions& options);

  Backend& cpu() { return *cpu_; }
  CudaBackend& gpu() { return *gpu_; }

  // Rounds `values` to bf16 in place and uploads them: f32 on the CPU, bf16 on the GPU.
  Pair bf16(const std::vector<int64_t>& shape, std::vector<float>& values);
  Pair f32(const std::vector<int64_t>& shape, const std::vector<float>& values);
  Pair i32(const std::vector<int64_t>& shape, const std::vector<int32_t>& values);
  Pair i64(const std::vector<int64_t>& shape, const std::vector<int64_t>& values);
  // An output: zeros on the CPU, poisoned (all bytes 0xff: NaN for floats, -1 for ints) on the GPU.
  Pair output(DType gpu_dtype, const std::vector<int64_t>& shape);
  // Overwrites a GPU tensor with poison bytes.
  void poison(const Tensor& gpu);

  // GPU tensor (bf16 or f32) as floats; int tensors as ints. These wait for the stream.
  std::vector<float> floats(const Tensor& gpu);
  std::vector<int32_t> ints(const Tensor& gpu);

 private:
  std::unique_ptr<Backend> cpu_;
  std::unique_ptr<CudaBackend> gpu_;
};

Tensor alloc(Backend& backend, DType dtype, const std::vector<int64_t>& shape);

// Host copies of CPU tensors.
std::vector<float> cpu_floats(const Tensor& cpu);
std::vector<int32_t> cpu_ints(const Tensor& cpu);

// Uniform values in [lo, hi), never all zero.
std::vector<float> uniform(std::mt19937& rng, size_t n, float lo = -1.0f, float hi = 1.0f);

struct Tolerance {
  float atol;
  float rtol;
};
// Checks got against ref elementwise; adds one failure listing the count and the first few mismatches.
void expect_close(const std::string& what, const std::vector<float>& ref, const std::vector<float>& got,
                  Tolerance tol);
void expect_equal(const std::string& what, const std::vector<int32_t>& ref, const std::vector<int32_t>& got);

// Root mean square of values (for tolerances relative to the output's scale).
float rms(const std::vector<float>& values);

}  // namespace tpserve::cuda_test
