// The CUDA probe: HBM read bandwidth measured on the engine's GPU in the same run, with the kernel and the
// method of bench/ops (a read-only reduction over a buffer far larger than L2, median of timed repetitions),
// so that the floor of tp_decode and the op shares of bench/ops use the same yardstick. The device's busy
// time per step is not measured (it needs CUPTI kernel activity): the report prints n/a for it.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <vector>

#include "bench/bench_kernels.h"
#include "bench/tp_decode/device_probe.h"
#include "common/cuda_check.h"
#include "common/log.h"
#include "runtime/backend/cuda/cuda_backend.h"

namespace tpserve::bench {
namespace {

constexpr size_t kBytes = size_t(2) << 30;  // 2 GiB: 40x the H200's L2
constexpr int kReps = 9;

class CudaProbe final : public DeviceProbe {
 public:
  explicit CudaProbe(CudaBackend& backend) : backend_(backend) {}
  std::string name() const override {
    return "cuda device " + std::to_string(backend_.device_index()) + " (HBM read, 2 GiB reduction)";
  }

  // Outside steps only (it allocates): after an engine is built.
  std::optional<double> measure_memory_bandwidth_gbps() override {
    CUDA_CHECK(cudaSetDevice(backend_.device_index()));
    void* data = nullptr;
    float* partial = nullptr;
    const int blocks = backend_.num_sms() * 4;
    if (cudaMalloc(&data, kBytes) != cudaSuccess) {
      cudaGetLastError();
      log_warn("device probe: no room for the 2 GiB bandwidth buffer next to the engine; floor not measured");
      return std::nullopt;
    }
    std::optional<double> gbps;
    cudaEvent_t start = nullptr, stop = nullptr;
    try {
      CUDA_CHECK(cudaMalloc(&partial, sizeof(float) * blocks));
      CUDA_CHECK(cudaEventCreate(&start));
      CUDA_CHECK(cudaEventCreate(&stop));
      cudaStream_t s = backend_.stream();
      const auto& policy = backend_.launch_policy();
      launch_fill_bf16(policy, s, data, kBytes, 17);
      launch_read_reduce(policy, s, data, kBytes, partial, blocks);  // warm-up
      std::vector<float> ms(kReps);
      for (float& t : ms) {
        CUDA_CHECK(cudaEventRecord(start, s));
        launch_read_reduce(policy, s, data, kBytes, partial, blocks);
        CUDA_CHECK(cudaEventRecord(stop, s));
        CUDA_CHECK(cudaEventSynchronize(stop));
        CUDA_CHECK(cudaEventElapsedTime(&t, start, stop));
      }
      std::nth_element(ms.begin(), ms.begin() + kReps / 2, ms.end());
      gbps = double(kBytes) / (ms[kReps / 2] * 1e-3) / 1e9;
    } catch (...) {
      release(data, partial, start, stop);
      throw;
    }
    release(data, partial, start, stop);
    return gbps;
  }

  void step_begin() override {}
  std::optional<double> step_end_busy_seconds() override { return std::nullopt; }

 private:
  static void release(void* data, float* partial, cudaEvent_t start, cudaEvent_t stop) {
    cudaFree(data);
    if (partial != nullptr) cudaFree(partial);
    if (start != nullptr) cudaEventDestroy(start);
    if (stop != nullptr) cudaEventDestroy(stop);
  }

  CudaBackend& backend_;
};

}  // namespace

std::unique_ptr<DeviceProbe> make_cuda_device_probe(Backend& backend) {
  auto* cuda = dynamic_cast<CudaBackend*>(&backend);
  return cuda == nullptr ? nullptr : std::make_unique<CudaProbe>(*cuda);
}

}  // namespace tpserve::bench
