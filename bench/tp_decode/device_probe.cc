// The probe for an engine's backend: the CUDA one (cuda_device_probe.cc) or a host probe that measures
// nothing.
#include "bench/tp_decode/device_probe.h"

#include "common/error.h"

namespace tpserve::bench {
namespace {

// Host backends: no device, so no bandwidth to measure and no busy time.
class HostProbe final : public DeviceProbe {
 public:
  explicit HostProbe(std::string backend) : backend_(std::move(backend)) {}
  std::string name() const override { return backend_ + " backend (no device probe)"; }
  std::optional<double> measure_memory_bandwidth_gbps() override { return std::nullopt; }
  void step_begin() override {}
  std::optional<double> step_end_busy_seconds(bool) override { return std::nullopt; }

 private:
  std::string backend_;
};

}  // namespace

std::unique_ptr<DeviceProbe> make_device_probe(Backend& backend, bool gpu_busy, bool phase_trace,
                                               int phase_trace_layer) {
#if TPSERVE_HAVE_CUDA
  if (auto probe = make_cuda_device_probe(backend, gpu_busy, phase_trace, phase_trace_layer)) return probe;
#endif
  (void)phase_trace_layer;
  (void)gpu_busy;  // host backends: no device to be busy
  TPS_CHECK(!phase_trace, "--phase-trace traces CUDA kernels; backend ", backend.name(), " has none");
  return std::make_unique<HostProbe>(backend.name());
}

}  // namespace tpserve::bench
