#include "bench/common/chain_advance.h"

#include <algorithm>
#include <numeric>

namespace tpserve::bench {

std::vector<uint64_t> chain_advances_ns(const std::vector<BusyInterval>& intervals) {
  std::vector<uint64_t> advances(intervals.size(), 0);
  if (intervals.empty()) return advances;
  std::vector<size_t> order(intervals.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return intervals[a].end_ns < intervals[b].end_ns; });
  uint64_t last_end = intervals[0].start_ns;
  for (const BusyInterval& i : intervals) last_end = std::min(last_end, i.start_ns);
  for (size_t at : order) {
    const uint64_t end = intervals[at].end_ns;
    advances[at] = end > last_end ? end - last_end : 0;
    last_end = std::max(last_end, end);
  }
  return advances;
}

}  // namespace tpserve::bench
