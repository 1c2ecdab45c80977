// bench/gating_cycles/gating_cycles_kernel.h. Launched as Pdl::kNever under the top-k site: a measurement,
// not part of any op chain.
#include "bench/gating_cycles/gating_cycles_kernel.h"

#include <algorithm>

#include "common/counter_hash.h"
#include "common/cuda_check.h"
#include "common/error.h"
#include "kernels/launch.h"
#include "kernels/topk_gating.cuh"
#include "runtime/backend/cpu/cpu_ops.h"
#include "runtime/backend/cuda/device_memory.h"

namespace tpserve::bench {
namespace {

constexpr int kPerLane = 4;  // 128 experts: the fused router's shape
constexpr int kMaxExperts = kPerLane * kernels::kWarpSize;
constexpr int kThreads = 256;

// logits: [E]; cycles: [gridDim.x][reps]; weights, ids: [gridDim.x][reps][k] (every pass's picks, checked).
__global__ void gating_cycles_kernel(const float* logits, int experts, int k, bool redux, bool by_logits,
                                     int reps, long long* cycles, float* weights, int32_t* ids) {
  __shared__ float logits_s[kMaxExperts];
  for (int i = threadIdx.x; i < experts; i += blockDim.x) logits_s[i] = logits[i];
  __syncthreads();
  if (threadIdx.x >= kernels::kWarpSize) return;
  for (int r = 0; r < reps; ++r) {
    const int64_t pass = static_cast<int64_t>(blockIdx.x) * reps + r;
    __syncwarp();
    const long long start = clock64();
    kernels::warp_topk_gating<kPerLane>(logits_s, experts, k, true, weights + pass * k, ids + pass * k, redux,
                                        by_logits);
    __syncwarp();
    const long long end = clock64();
    if (threadIdx.x == 0) cycles[pass] = end - start;
  }
}

}  // namespace

std::vector<std::vector<long long>> run_gating_cycles(const GatingCyclesCase& c, int launches,
                                                      uint64_t seed) {
  TPS_CHECK(c.experts >= 1 && c.experts <= kMaxExperts, "gating_cycles: experts must be in [1, ", kMaxExperts,
            "], got ", c.experts);
  TPS_CHECK(c.k >= 1 && c.k <= std::min(c.experts, kernels::kGatingMaxK), "gating_cycles: k=", c.k,
            " outside [1, min(experts, ", kernels::kGatingMaxK, ")]");
  TPS_CHECK(c.reps >= 1 && launches >= 1, "gating_cycles: reps and launches must be positive");
  int device = 0, sms = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));

  std::vector<float> logits(c.experts);
  for (int e = 0; e < c.experts; ++e) logits[e] = static_cast<float>(8.0 * uniform_open01(seed, 0, e) - 4.0);
  std::vector<int32_t> expected(c.k);  // the CPU reference's picks
  std::vector<float> expected_weights(c.k);
  cpu::topk_gating(Tensor(logits.data(), DType::kF32, Device::kCpu, {1, c.experts}), c.k, true,
                   Tensor(expected_weights.data(), DType::kF32, Device::kCpu, {1, c.k}),
                   Tensor(expected.data(), DType::kI32, Device::kCpu, {1, c.k}));

  const size_t passes = static_cast<size_t>(sms) * c.reps;
  DeviceArena arena(DeviceArena::kAlignment * 4 + c.experts * sizeof(float) +
                    passes * (sizeof(long long) + c.k * (sizeof(float) + sizeof(int32_t))));
  auto* logits_d = static_cast<float*>(arena.allocate(c.experts * sizeof(float), "logits"));
  auto* weights_d = static_cast<float*>(arena.allocate(passes * c.k * sizeof(float), "weights"));
  auto* cycles_d = static_cast<long long*>(arena.allocate(passes * sizeof(long long), "cycles"));
  auto* ids_d = static_cast<int32_t*>(arena.allocate(passes * c.k * sizeof(int32_t), "ids"));
  CUDA_CHECK(cudaMemcpy(logits_d, logits.data(), logits.size() * sizeof(float), cudaMemcpyHostToDevice));
  kernels::LaunchPolicy policy;
  std::vector<std::vector<long long>> out;
  std::vector<int32_t> ids(passes * c.k);
  for (int l = 0; l < launches; ++l) {
    kernels::launch(policy, kernels::Site::kTopkGating, kernels::Pdl::kNever, gating_cycles_kernel, dim3(sms),
                    dim3(kThreads), 0, nullptr, logits_d, c.experts, c.k, c.redux, c.by_logits, c.reps,
                    cycles_d, weights_d, ids_d);
    CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<long long>& cycles = out.emplace_back(passes);
    CUDA_CHECK(cudaMemcpy(cycles.data(), cycles_d, passes * sizeof(long long), cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(ids.data(), ids_d, ids.size() * sizeof(int32_t), cudaMemcpyDeviceToHost));
    for (size_t pass = 0; pass < passes; ++pass)
      TPS_CHECK(std::equal(expected.begin(), expected.end(), ids.begin() + pass * c.k),
                "gating_cycles: pass ", pass, " of launch ", l,
                " picked other experts than the CPU reference");
  }
  return out;
}

}  // namespace tpserve::bench
