#include "bench/common/busy_intervals.h"

#include <algorithm>

namespace tpserve::bench {

uint64_t union_ns(std::vector<BusyInterval>& intervals) {
  std::sort(intervals.begin(), intervals.end(),
            [](const BusyInterval& a, const BusyInterval& b) { return a.start_ns < b.start_ns; });
  uint64_t total = 0, open_start = 0, open_end = 0;
  bool open = false;
  for (const BusyInterval& i : intervals) {
    if (i.end_ns <= i.start_ns) continue;
    if (open && i.start_ns <= open_end) {
      open_end = std::max(open_end, i.end_ns);
      continue;
    }
    if (open) total += open_end - open_start;
    open = true;
    open_start = i.start_ns;
    open_end = i.end_ns;
  }
  if (open) total += open_end - open_start;
  return total;
}

}  // namespace tpserve::bench
