// Benchmark helper kernels. They are not part of any op chain: launched as Pdl::kNever (under the `add`
// site, the closest elementwise site) so that they never carry PDL.
#include "bench/bench_kernels.h"

#include <algorithm>
#include <vector>

#include "common/counter_hash.h"
#include "common/cuda_check.h"
#include "kernels/device_common.cuh"

namespace tpserve::bench {
namespace {

constexpr int kThreads = 512;
constexpr int kUnroll = 4;

__global__ void read_reduce_kernel(const uint4* data, size_t vectors, float* partial) {
  __shared__ float scratch[kThreads / kernels::kWarpSize];
  float sum = 0.0f;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + (kUnroll - 1) * stride < vectors; i += kUnroll * stride) {
    uint4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = data[i + u * stride];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      float f[8];
      kernels::unpack_bf16x8(v[u], f);
#pragma unroll
      for (int j = 0; j < 8; ++j) sum += f[j];
    }
  }
  for (; i < vectors; i += stride) {
    float f[8];
    kernels::unpack_bf16x8(data[i], f);
    for (int j = 0; j < 8; ++j) sum += f[j];
  }
  sum = kernels::block_sum(sum, scratch);
  if (threadIdx.x == 0) partial[blockIdx.x] = sum;
}

__global__ void fill_bf16_kernel(kernels::bf16* data, size_t n, uint64_t seed) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    data[i] = __float2bfloat16(static_cast<float>(2.0 * uniform_open01(seed, 0, i) - 1.0));
}

__global__ void spin_kernel(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

}  // namespace

void launch_read_reduce(const kernels::LaunchPolicy& policy, cudaStream_t stream, const void* data,
                        size_t bytes, float* partial, int blocks) {
  kernels::launch(policy, kernels::Site::kAdd, kernels::Pdl::kNever, read_reduce_kernel, dim3(blocks),
                  dim3(kThreads), 0, stream, static_cast<const uint4*>(data), bytes / 16, partial);
}

double time_read_bandwidth_gbps(const kernels::LaunchPolicy& policy, cudaStream_t stream, const void* data,
                                size_t bytes, float* partial, int blocks, int reps) {
  struct Events {
    cudaEvent_t start = nullptr, stop = nullptr;
    ~Events() {
      if (start != nullptr) cudaEventDestroy(start);
      if (stop != nullptr) cudaEventDestroy(stop);
    }
  } e;
  CUDA_CHECK(cudaEventCreate(&e.start));
  CUDA_CHECK(cudaEventCreate(&e.stop));
  launch_read_reduce(policy, stream, data, bytes, partial, blocks);  // warm-up
  std::vector<float> ms(static_cast<size_t>(std::max(reps, 1)));
  for (float& t : ms) {
    CUDA_CHECK(cudaEventRecord(e.start, stream));
    launch_read_reduce(policy, stream, data, bytes, partial, blocks);
    CUDA_CHECK(cudaEventRecord(e.stop, stream));
    CUDA_CHECK(cudaEventSynchronize(e.stop));
    CUDA_CHECK(cudaEventElapsedTime(&t, e.start, e.stop));
  }
  std::nth_element(ms.begin(), ms.begin() + ms.size() / 2, ms.end());
  return double(bytes) / (ms[ms.size() / 2] * 1e-3) / 1e9;
}

void launch_fill_bf16(const kernels::LaunchPolicy& policy, cudaStream_t stream, void* data, size_t bytes,
                      uint64_t seed) {
  kernels::launch(policy, kernels::Site::kAdd, kernels::Pdl::kNever, fill_bf16_kernel, dim3(4096), dim3(256),
                  0, stream, static_cast<kernels::bf16*>(data), bytes / 2, seed);
}

void launch_spin(const kernels::LaunchPolicy& policy, cudaStream_t stream, long long cycles) {
  kernels::launch(policy, kernels::Site::kAdd, kernels::Pdl::kNever, spin_kernel, dim3(1), dim3(1), 0, stream,
                  cycles);
}

}  // namespace tpserve::bench
