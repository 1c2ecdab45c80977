// Each record's share of a step's span when the step is a chain of dependent kernels (PDL): the records
// ordered by end time, a record's advance is its end minus the end before it (the step's first start for
// the first). The advances sum to the span from the first start to the last end. Under PDL a kernel starts
// early and waits, so its duration says little; its advance is what it added to the chain after its
// predecessor ended: the work after its wait and the release of that wait. Gaps (an idle device) count to
// the record that ends next.
#pragma once

#include <cstdint>
#include <vector>

#include "bench/common/busy_intervals.h"

namespace tpserve::bench {

// advances[i]: the advance of intervals[i] in nanoseconds (intervals in any order; empty or inverted ones
// advance by what their end adds, possibly 0).
std::vector<uint64_t> chain_advances_ns(const std::vector<BusyInterval>& intervals);

}  // namespace tpserve::bench
