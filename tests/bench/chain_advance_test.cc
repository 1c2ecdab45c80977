// A record's advance of a chain: its end minus the end before it. In a PDL chain a kernel starts long before
// its predecessor ends, yet its advance is only what it adds after that end; advances sum to the span.
#include <gtest/gtest.h>

#include <numeric>

#include "bench/common/chain_advance.h"

namespace tpserve::bench {
namespace {

TEST(ChainAdvance, EachRecordGetsWhatItAddsAfterTheEndBeforeIt) {
  EXPECT_TRUE(chain_advances_ns({}).empty());
  // A chain under PDL, out of order: a [100, 200), b starts at 150 and ends at 230, c starts at 160 and ends
  // at 300, then after a gap d [350, 360).
  const std::vector<BusyInterval> v = {{160, 300}, {100, 200}, {350, 360}, {150, 230}};
  const std::vector<uint64_t> got = chain_advances_ns(v);
  EXPECT_EQ(got, (std::vector<uint64_t>{70, 100, 60, 30}));
  EXPECT_EQ(std::accumulate(got.begin(), got.end(), uint64_t{0}), 360u - 100u);  // the span
}

TEST(ChainAdvance, NestedAndTiedRecordsAddNothing) {
  // b inside a ends before it: b advances from the first start, a by the rest; c ties a's end: nothing.
  const std::vector<BusyInterval> v = {{100, 300}, {120, 200}, {250, 300}};
  EXPECT_EQ(chain_advances_ns(v), (std::vector<uint64_t>{100, 100, 0}));
}

}  // namespace
}  // namespace tpserve::bench
