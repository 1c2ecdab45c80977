// DeviceProbe: the numbers tp_decode can only get from a GPU: memory bandwidth measured in the same run
// (for the HBM floor) and the device's busy time per step (for the GPU busy share of wall time). The CPU
// backend has neither: its probe answers nullopt and the report prints "n/a".
//
// Hook for CUDA builds: make_device_probe() returns a CUDA probe when the engine's backend is the CUDA one
// (under TPSERVE_HAVE_CUDA). It should
//   - measure_memory_bandwidth_gbps(): time a large device-to-device copy (well past L2, several
//     repetitions, median) and return (bytes read + bytes written) / seconds / 1e9;
//   - step_begin() / step_end_busy_seconds(): bracket one engine.step() (both are called outside the host
//     timer) and return the seconds the device spent executing kernels in it (CUPTI kernel activity, or
//     the sum of per-kernel event pairs): busy share = busy / wall step time.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "runtime/backend/backend.h"

namespace tpserve::bench {

class DeviceProbe {
 public:
  virtual ~DeviceProbe() = default;
  virtual std::string name() const = 0;
  virtual std::optional<double> measure_memory_bandwidth_gbps() = 0;
  virtual void step_begin() = 0;
  virtual std::optional<double> step_end_busy_seconds() = 0;
};

// The probe for the backend an engine runs on (the CPU backend: one that measures nothing).
std::unique_ptr<DeviceProbe> make_device_probe(Backend& backend);

}  // namespace tpserve::bench
