// The CUDA probe: HBM read bandwidth measured on the engine's GPU in the same run, with the kernel and the
// method of bench/ops (a read-only reduction over a buffer far larger than L2, median of timed repetitions),
// so that the floor of tp_decode and the op shares of bench/ops use the same yardstick. With --gpu-busy, the
// device's busy time per step from CUPTI activity records (cupti_busy_tracer.h); else n/a.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "bench/bench_kernels.h"
#include "bench/common/phase_summary.h"
#include "bench/tp_decode/device_probe.h"
#include "common/cuda_check.h"
#include "common/log.h"
#include "kernels/phase_trace.h"
#include "runtime/backend/cuda/cuda_backend.h"
#if TPSERVE_HAVE_CUPTI
#include "bench/tp_decode/cupti_busy_tracer.h"
#endif

namespace tpserve::bench {
namespace {

constexpr size_t kBytes = size_t(2) << 30;  // 2 GiB: 40x the H200's L2
constexpr int kReps = 9;

class CudaProbe final : public DeviceProbe {
 public:
  CudaProbe(CudaBackend& backend, bool gpu_busy, bool phase_trace, int phase_trace_layer)
      : backend_(backend), gpu_busy_(gpu_busy), phase_trace_(phase_trace), layer_(phase_trace_layer) {
    TPS_CHECK(!phase_trace_ || kernels::phase_trace_built(),
              "--phase-trace needs kernels built with phase marks (cmake -DTPSERVE_PHASE_TRACE=ON)");
    if (phase_trace_) {
      kernels::clear_phase_traces();
      kernels::set_phase_trace_launches([](kernels::TracedKernel) { return -1; });
    }
#if TPSERVE_HAVE_CUPTI
    if (gpu_busy_) CuptiBusyTracer::instance().start();
#else
    TPS_CHECK(!gpu_busy_, "--gpu-busy needs CUPTI, which this build did not find (CUDA::cupti)");
#endif
  }
  std::string name() const override {
    return "cuda device " + std::to_string(backend_.device_index()) + " (HBM read, 2 GiB reduction" +
           (gpu_busy_ ? "; busy time from CUPTI activity)" : ")");
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
    try {
      CUDA_CHECK(cudaMalloc(&partial, sizeof(float) * blocks));
      launch_fill_bf16(backend_.launch_policy(), backend_.stream(), data, kBytes, 17);
      gbps = time_read_bandwidth_gbps(backend_.launch_policy(), backend_.stream(), data, kBytes, partial,
                                      blocks, kReps);
    } catch (...) {
      release(data, partial);
      throw;
    }
    release(data, partial);
    return gbps;
  }

  void step_begin() override {
    // Layer L's launches: each traced kernel's L-th of the step, but the RMSNorm's (L + 1)-th, the one that
    // sums layer L's MoE (a decode step's first RMSNorm is layer 0's input norm).
    if (phase_trace_ && layer_ >= 0)
      kernels::set_phase_trace_launches([&](kernels::TracedKernel k) {
        return k == kernels::TracedKernel::kRmsNorm ? layer_ + 1 : layer_;
      });
#if TPSERVE_HAVE_CUPTI
    if (gpu_busy_) {
      CUDA_CHECK(cudaStreamSynchronize(backend_.stream()));  // earlier work must not count
      since_ns_ = CuptiBusyTracer::instance().now_ns();
    }
#endif
  }
  std::optional<double> step_end_busy_seconds([[maybe_unused]] bool keep_kernel_times) override {
    if (phase_trace_ && keep_kernel_times) add_phase_step();
#if TPSERVE_HAVE_CUPTI
    if (gpu_busy_) {
      const uint64_t ns = CuptiBusyTracer::instance().busy_ns_since(
          since_ns_, static_cast<uint32_t>(backend_.device_index()), keep_kernel_times ? &kernels_ : nullptr);
      return static_cast<double>(ns) * 1e-9;
    }
#endif
    return std::nullopt;
  }
  std::string take_phase_report() override {
    if (!phase_trace_ || phases_.steps() == 0) return {};
    std::ostringstream out;
    if (layer_ < 0)
      phases_.report(out);  // each kernel's last launch
    else
      phases_.report(out, "layer " + std::to_string(layer_) + "'s launches of each kernel");
    phases_ = PhaseAccumulator{};
    return out.str();
  }
  std::vector<KernelTime> take_kernel_times() override {
    std::vector<KernelTime> out;
    for (auto& [name, k] : kernels_) {
      k.name = name;
      out.push_back(std::move(k));
    }
    kernels_.clear();
    std::sort(out.begin(), out.end(),
              [](const KernelTime& a, const KernelTime& b) { return a.seconds > b.seconds; });
    return out;
  }

 private:
  // The traced kernels' launches in the step just ended: by default their last ones, the last layer's QKV
  // projection (the step's last staged GEMV triggering before its wait), attention, O projection (the last
  // other staged GEMV), router, gate_up and down, and the RMSNorm summing its combine (the final norm); with
  // --phase-trace-layer, that layer's (step_begin()).
  void add_phase_step() {
    CUDA_CHECK(cudaSetDevice(backend_.device_index()));  // the traced kernels' buffers are per device
    std::vector<PhaseAccumulator::Kernel> step;
    for (kernels::TracedKernel k : kernels::kTracedKernels) {
      const kernels::TracedKernelNames& names = kernels::traced_kernel_names(k);
      step.push_back({names.kernel, names.marks,
                      summarize_launch(kernels::read_phase_trace(k), kernels::kPhaseTraceMarks,
                                       kernels::kPhaseMarkWaitReturned)});
    }
    phases_.add_step(step);
  }

  static void release(void* data, float* partial) {
    cudaFree(data);
    if (partial != nullptr) cudaFree(partial);
  }

  CudaBackend& backend_;
  bool gpu_busy_ = false;
  bool phase_trace_ = false;
  int layer_ = -1;  // the layer traced (--phase-trace-layer); -1: each kernel's last launch
  PhaseAccumulator phases_;
  [[maybe_unused]] uint64_t since_ns_ = 0;
  std::map<std::string, KernelTime> kernels_;  // kept steps since the last take_kernel_times()
};

}  // namespace

std::unique_ptr<DeviceProbe> make_cuda_device_probe(Backend& backend, bool gpu_busy, bool phase_trace,
                                                    int phase_trace_layer) {
  auto* cuda = dynamic_cast<CudaBackend*>(&backend);
  return cuda == nullptr ? nullptr
                         : std::make_unique<CudaProbe>(*cuda, gpu_busy, phase_trace, phase_trace_layer);
}

}  // namespace tpserve::bench
