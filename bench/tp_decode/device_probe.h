// DeviceProbe: the numbers tp_decode can only get from a GPU: memory bandwidth measured in the same run
// (for the HBM floor) and the device's busy time per step (for the GPU busy share of wall time). The CPU
// backend has neither: its probe answers nullopt and the report prints "n/a".
//
// CUDA builds: make_device_probe() returns the CUDA probe (cuda_device_probe.cc) for the CUDA backend: HBM
// read bandwidth as bench/ops measures it (a 2 GiB reduction, median of 9), and with gpu_busy the device's
// busy time per step from CUPTI activity records (kernels of replayed graphs included; tracing them costs
// some launch overhead, hence opt-in). step_begin() and step_end_busy_seconds() bracket one engine.step()
// outside the host timer.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/backend/backend.h"

namespace tpserve::bench {

// Device time of one kernel (by name, template arguments dropped) summed over the steps kept.
struct KernelTime {
  std::string name;
  int64_t launches = 0;
  double seconds = 0;
  double advance_seconds = 0;  // its advances of the step's chain (bench/common/chain_advance.h)
};

class DeviceProbe {
 public:
  virtual ~DeviceProbe() = default;
  virtual std::string name() const = 0;
  virtual std::optional<double> measure_memory_bandwidth_gbps() = 0;
  virtual void step_begin() = 0;
  // keep_kernel_times: add this step's kernels to the table take_kernel_times() returns (tp_decode keeps
  // decode-only steps, so that one prefill does not weigh on the table).
  virtual std::optional<double> step_end_busy_seconds(bool keep_kernel_times) = 0;
  // The kernels kept since the last call, longest total first (empty without --gpu-busy or a device).
  virtual std::vector<KernelTime> take_kernel_times() { return {}; }
  // With phase tracing: where the traced kernels' time went in the steps kept since the last call (the
  // medians of their phase marks, bench/common/phase_summary.h); else empty.
  virtual std::string take_phase_report() { return {}; }
};

// The probe for the backend an engine runs on (the CPU backend: one that measures nothing).
// gpu_busy: measure the busy time per step (CUDA with CUPTI; elsewhere n/a). phase_trace: read the kernels'
// phase marks after each kept step (CUDA builds with TPSERVE_PHASE_TRACE; refused elsewhere), of layer
// phase_trace_layer's kernels (-1: the last layer's).
std::unique_ptr<DeviceProbe> make_device_probe(Backend& backend, bool gpu_busy = false,
                                               bool phase_trace = false, int phase_trace_layer = -1);
// The CUDA probe, or nullptr when `backend` is not the CUDA backend (CUDA builds only).
std::unique_ptr<DeviceProbe> make_cuda_device_probe(Backend& backend, bool gpu_busy, bool phase_trace,
                                                    int phase_trace_layer);

}  // namespace tpserve::bench
