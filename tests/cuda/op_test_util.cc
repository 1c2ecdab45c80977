#include "tests/cuda/op_test_util.h"

#include <cstring>
#include <sstream>

#include "common/cuda_check.h"
#include "common/dtype.h"

namespace tpserve::cuda_test {

Tensor alloc(Backend& backend, DType dtype, const std::vector<int64_t>& shape) {
  switch (shape.size()) {
    case 1:
      return backend.alloc(dtype, {shape[0]});
    case 2:
      return backend.alloc(dtype, {shape[0], shape[1]});
    case 3:
      return backend.alloc(dtype, {shape[0], shape[1], shape[2]});
    case 4:
      return backend.alloc(dtype, {shape[0], shape[1], shape[2], shape[3]});
    default:
      TPS_THROW("test tensor of rank ", shape.size());
  }
}

CudaBackendOptions test_backend_options(size_t arena_bytes, size_t workspace_bytes) {
  CudaBackendOptions options;
  options.kernels.gemv_max_rows =
      kLinearGemvMaxRows;  // every GEMV shape reachable by configuration is tested
  options.arena_bytes = arena_bytes;
  options.workspace_bytes = workspace_bytes;
  options.cublas_workspace_bytes = size_t(32) << 20;
  options.staging_bytes = size_t(8) << 20;
  return options;
}

Backends::Backends(const CudaBackendOptions& options)
    : cpu_(make_cpu_backend()), gpu_(make_cuda_backend(options)) {}

Backends::Backends(size_t arena_bytes, size_t workspace_bytes)
    : Backends(test_backend_options(arena_bytes, workspace_bytes)) {}

Pair Backends::bf16(const std::vector<int64_t>& shape, std::vector<float>& values) {
  Pair p{alloc(*cpu_, DType::kF32, shape), alloc(*gpu_, DType::kBF16, shape)};
  TPS_CHECK(static_cast<int64_t>(values.size()) == p.cpu.numel(), "test: ", values.size(), " values for ",
            p.cpu.shape_string());
  std::vector<uint16_t> bits(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    bits[i] = f32_to_bf16(values[i]);
    values[i] = bf16_to_f32(bits[i]);
  }
  cpu_->copy_from_host(p.cpu, values.data());
  gpu_->copy_from_host(p.gpu, bits.data());
  return p;
}

Pair Backends::f32(const std::vector<int64_t>& shape, const std::vector<float>& values) {
  Pair p{alloc(*cpu_, DType::kF32, shape), alloc(*gpu_, DType::kF32, shape)};
  TPS_CHECK(static_cast<int64_t>(values.size()) == p.cpu.numel(), "test: f32 values size");
  cpu_->copy_from_host(p.cpu, values.data());
  gpu_->copy_from_host(p.gpu, values.data());
  return p;
}

Pair Backends::i32(const std::vector<int64_t>& shape, const std::vector<int32_t>& values) {
  Pair p{alloc(*cpu_, DType::kI32, shape), alloc(*gpu_, DType::kI32, shape)};
  TPS_CHECK(static_cast<int64_t>(values.size()) == p.cpu.numel(), "test: i32 values size");
  cpu_->copy_from_host(p.cpu, values.data());
  gpu_->copy_from_host(p.gpu, values.data());
  return p;
}

Pair Backends::i64(const std::vector<int64_t>& shape, const std::vector<int64_t>& values) {
  Pair p{alloc(*cpu_, DType::kI64, shape), alloc(*gpu_, DType::kI64, shape)};
  TPS_CHECK(static_cast<int64_t>(values.size()) == p.cpu.numel(), "test: i64 values size");
  cpu_->copy_from_host(p.cpu, values.data());
  gpu_->copy_from_host(p.gpu, values.data());
  return p;
}

Pair Backends::output(DType gpu_dtype, const std::vector<int64_t>& shape) {
  const bool is_int = gpu_dtype == DType::kI32 || gpu_dtype == DType::kI64;
  Pair p{alloc(*cpu_, is_int ? gpu_dtype : DType::kF32, shape), alloc(*gpu_, gpu_dtype, shape)};
  poison(p.gpu);
  return p;
}

void Backends::poison(const Tensor& gpu) {
  CUDA_CHECK(cudaMemsetAsync(gpu.data, 0xff, gpu.nbytes(), gpu_->stream()));
}

std::vector<float> Backends::floats(const Tensor& gpu) {
  std::vector<float> out(static_cast<size_t>(gpu.numel()));
  if (gpu.dtype == DType::kF32) {
    gpu_->copy_to_host(out.data(), gpu);
  } else {
    TPS_CHECK(gpu.dtype == DType::kBF16, "test: floats() of ", gpu.shape_string());
    std::vector<uint16_t> bits(out.size());
    gpu_->copy_to_host(bits.data(), gpu);
    for (size_t i = 0; i < out.size(); ++i) out[i] = bf16_to_f32(bits[i]);
  }
  return out;
}

std::vector<int32_t> Backends::ints(const Tensor& gpu) {
  TPS_CHECK(gpu.dtype == DType::kI32, "test: ints() of ", gpu.shape_string());
  std::vector<int32_t> out(static_cast<size_t>(gpu.numel()));
  gpu_->copy_to_host(out.data(), gpu);
  return out;
}

std::vector<float> cpu_floats(const Tensor& cpu) {
  return std::vector<float>(cpu.ptr<float>(), cpu.ptr<float>() + cpu.numel());
}

std::vector<int32_t> cpu_ints(const Tensor& cpu) {
  return std::vector<int32_t>(cpu.ptr<int32_t>(), cpu.ptr<int32_t>() + cpu.numel());
}

std::vector<float> uniform(std::mt19937& rng, size_t n, float lo, float hi) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  bool any = false;
  for (auto& x : v) any |= (x = dist(rng)) != 0.0f;
  if (!any && n > 0) v[0] = hi * 0.5f + lo * 0.5f + 0.25f;
  return v;
}

void expect_close(const std::string& what, const std::vector<float>& ref, const std::vector<float>& got,
                  Tolerance tol) {
  ASSERT_EQ(ref.size(), got.size()) << what;
  size_t bad = 0;
  std::ostringstream first;
  for (size_t i = 0; i < ref.size(); ++i) {
    const float r = ref[i], g = got[i];
    bool ok;
    if (std::isnan(r) || std::isnan(g))
      ok = std::isnan(r) && std::isnan(g);
    else if (std::isinf(r) || std::isinf(g))
      ok = r == g;
    else
      ok = std::fabs(r - g) <= tol.atol + tol.rtol * std::fabs(r);
    if (!ok && bad++ < 5)
      first << "\n  [" << i << "] ref " << r << " got " << g << " (diff " << std::fabs(r - g) << ")";
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << ref.size() << " outside atol " << tol.atol
                     << " + rtol " << tol.rtol << " * |ref|; first:" << first.str();
}

void expect_equal(const std::string& what, const std::vector<int32_t>& ref, const std::vector<int32_t>& got) {
  ASSERT_EQ(ref.size(), got.size()) << what;
  size_t bad = 0;
  std::ostringstream first;
  for (size_t i = 0; i < ref.size(); ++i)
    if (ref[i] != got[i] && bad++ < 5) first << "\n  [" << i << "] ref " << ref[i] << " got " << got[i];
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << ref.size() << " differ; first:" << first.str();
}

float rms(const std::vector<float>& values) {
  double sum = 0.0;
  for (float v : values) sum += double(v) * v;
  return values.empty() ? 0.0f : static_cast<float>(std::sqrt(sum / values.size()));
}

}  // namespace tpserve::cuda_test
