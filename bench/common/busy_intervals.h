// GPU busy time from activity records: the union of [start, end) intervals (ns), so that overlapping work
// (kernels on two streams, a copy beside a kernel) counts once.
#pragma once

#include <cstdint>
#include <vector>

namespace tpserve::bench {

struct BusyInterval {
  uint64_t start_ns = 0, end_ns = 0;
};

// Length of the union in nanoseconds; empty or inverted intervals count nothing. Sorts `intervals`.
uint64_t union_ns(std::vector<BusyInterval>& intervals);

}  // namespace tpserve::bench
