// LoadProgress and format_bytes.
#include "runtime/weights/load_progress.h"

#include <cstdio>
#include <iterator>
#include <utility>

#include "common/log.h"

namespace tpserve {

std::string format_bytes(uint64_t bytes) {
  if (bytes < 1000) return std::to_string(bytes) + " B";
  static constexpr const char* kUnits[] = {"KB", "MB", "GB", "TB"};
  double value = static_cast<double>(bytes) / 1000.0;
  size_t unit = 0;
  while (value >= 999.95 && unit + 1 < std::size(kUnits)) {
    value /= 1000.0;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f %s", value, kUnits[unit]);
  return text;
}

LoadProgress::LoadProgress(std::string label, uint64_t total_bytes, int64_t total_tensors,
                           std::chrono::milliseconds interval)
    : label_(std::move(label)),
      total_bytes_(total_bytes),
      total_tensors_(total_tensors),
      interval_(interval),
      start_(Clock::now()),
      last_line_(start_) {}

void LoadProgress::add(uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  bytes_done_ += bytes;
  ++tensors_done_;
  const Clock::time_point now = Clock::now();
  if (tensors_done_ == total_tensors_) {
    const double seconds = std::chrono::duration<double>(now - start_).count();
    const double rate = seconds > 0 ? static_cast<double>(bytes_done_) / seconds : 0.0;
    char timing[64];
    std::snprintf(timing, sizeof(timing), "%.1f s", seconds);
    log_info(label_, ": loaded ", format_bytes(bytes_done_), " (", tensors_done_, " tensors) in ", timing,
             " (", format_bytes(static_cast<uint64_t>(rate)), "/s)");
    return;
  }
  if (now - last_line_ >= interval_) {
    last_line_ = now;
    log_info(label_, ": loaded ", format_bytes(bytes_done_), " / ", format_bytes(total_bytes_), " (",
             tensors_done_, "/", total_tensors_, " tensors)");
  }
}

uint64_t LoadProgress::bytes_done() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return bytes_done_;
}

int64_t LoadProgress::tensors_done() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return tensors_done_;
}

}  // namespace tpserve
