// LoadProgress: info-level progress lines while weights load ("loaded 3.2 / 61.0 GB (120/18867 tensors)"),
// at most one every `interval`, and a last line with the elapsed time and rate when every tensor is in.
// Thread-safe: loader threads may call add() concurrently.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

namespace tpserve {

// "512 B", "3.4 KB", "5.6 MB", "61.0 GB" (decimal units, one decimal).
std::string format_bytes(uint64_t bytes);

class LoadProgress {
 public:
  LoadProgress(std::string label, uint64_t total_bytes, int64_t total_tensors,
               std::chrono::milliseconds interval = std::chrono::milliseconds(2000));

  // One tensor of `bytes` bytes is loaded. Logs when `interval` passed since the last line, and the final
  // line when the count reaches total_tensors.
  void add(uint64_t bytes);

  uint64_t bytes_done() const;
  int64_t tensors_done() const;

 private:
  using Clock = std::chrono::steady_clock;

  const std::string label_;
  const uint64_t total_bytes_;
  const int64_t total_tensors_;
  const std::chrono::milliseconds interval_;
  const Clock::time_point start_;

  mutable std::mutex mutex_;
  Clock::time_point last_line_;
  uint64_t bytes_done_ = 0;
  int64_t tensors_done_ = 0;
};

}  // namespace tpserve
