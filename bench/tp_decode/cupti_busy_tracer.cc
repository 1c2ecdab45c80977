#include "bench/tp_decode/cupti_busy_tracer.h"

#include <cupti.h>
#include <cstdlib>
#include <mutex>
#include <vector>

#include "bench/common/busy_intervals.h"
#include "bench/common/chain_advance.h"
#include "common/error.h"
#include "common/kernel_name.h"

namespace tpserve::bench {
namespace {

constexpr size_t kBufferBytes = size_t(8) << 20;

#define CUPTI_CHECK(call)                                                \
  do {                                                                   \
    const CUptiResult tps_cupti_rc_ = (call);                            \
    if (tps_cupti_rc_ != CUPTI_SUCCESS) {                                \
      const char* tps_cupti_text_ = "unknown";                           \
      cuptiGetResultString(tps_cupti_rc_, &tps_cupti_text_);             \
      ::tpserve::fail_check(#call, tps_cupti_text_, __FILE__, __LINE__); \
    }                                                                    \
  } while (0)

struct Record {
  uint32_t device;
  BusyInterval interval;
  std::string kernel;  // empty for copies and sets
};

std::mutex g_mutex;
std::vector<Record> g_records;  // completed records not yet consumed

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer != nullptr ? kBufferBytes : 0;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  std::vector<Record> got;
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    switch (record->kind) {
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      case CUPTI_ACTIVITY_KIND_KERNEL: {
        const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
        got.push_back({k->deviceId, {k->start, k->end}, short_kernel_name(k->name)});
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
        got.push_back({m->deviceId, {m->start, m->end}, {}});
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
        got.push_back({m->deviceId, {m->start, m->end}, {}});
        break;
      }
      default:
        break;
    }
  }
  std::free(buffer);
  std::lock_guard<std::mutex> lock(g_mutex);
  g_records.insert(g_records.end(), got.begin(), got.end());
}

}  // namespace

CuptiBusyTracer& CuptiBusyTracer::instance() {
  static CuptiBusyTracer tracer;
  return tracer;
}

void CuptiBusyTracer::start() {
  if (started_) return;
  CUPTI_CHECK(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed));
  CUPTI_CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  CUPTI_CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY));
  CUPTI_CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET));
  started_ = true;
}

uint64_t CuptiBusyTracer::now_ns() const {
  uint64_t t = 0;
  CUPTI_CHECK(cuptiGetTimestamp(&t));
  return t;
}

uint64_t CuptiBusyTracer::busy_ns_since(uint64_t since_ns, uint32_t device,
                                        std::map<std::string, KernelTime>* kernels) {
  TPS_CHECK(started_, "CUPTI busy tracer: start() first");
  CUPTI_CHECK(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
  std::vector<Record> step;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    std::vector<Record> keep;
    for (Record& r : g_records) {
      if (r.device == device && r.interval.start_ns >= since_ns)
        step.push_back(std::move(r));
      else if (r.device != device)
        keep.push_back(std::move(r));  // another device's (another probe may ask for it)
    }
    g_records.swap(keep);
  }
  std::vector<BusyInterval> mine;  // mine[i] is step[i]'s until union_ns sorts it, last
  for (const Record& r : step) mine.push_back(r.interval);
  if (kernels != nullptr) {
    const std::vector<uint64_t> advances = chain_advances_ns(mine);
    for (size_t i = 0; i < step.size(); ++i) {
      if (step[i].kernel.empty()) continue;
      KernelTime& k = (*kernels)[step[i].kernel];
      ++k.launches;
      k.seconds += static_cast<double>(step[i].interval.end_ns - step[i].interval.start_ns) * 1e-9;
      k.advance_seconds += static_cast<double>(advances[i]) * 1e-9;
    }
  }
  return union_ns(mine);
}

}  // namespace tpserve::bench
