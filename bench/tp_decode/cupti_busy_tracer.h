// GPU busy time per step from CUPTI activity records (kernels, including those of replayed CUDA graphs,
// memcpys and memsets): the union of their intervals on one device since a timestamp. Tracing every kernel
// costs some launch overhead, so tp_decode turns it on only with --gpu-busy.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "bench/tp_decode/device_probe.h"

namespace tpserve::bench {

// Process-wide (CUPTI's activity callbacks are): the first start() enables the activity kinds.
class CuptiBusyTracer {
 public:
  static CuptiBusyTracer& instance();
  void start();
  uint64_t now_ns() const;
  // Flushes the records and returns the busy nanoseconds on `device` of records that began at or after
  // `since_ns` (records before it are dropped). kernels: when not null, each kernel record is added to its
  // name's entry (names demangled, template arguments and parameters dropped; the entry's own name is left
  // to the caller).
  uint64_t busy_ns_since(uint64_t since_ns, uint32_t device, std::map<std::string, KernelTime>* kernels);

 private:
  CuptiBusyTracer() = default;
  bool started_ = false;
};

}  // namespace tpserve::bench
