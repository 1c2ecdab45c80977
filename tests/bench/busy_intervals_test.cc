// GPU busy time as the union of activity intervals: overlaps and nested intervals count once, gaps not at
// all, empty or inverted intervals nothing.
#include <gtest/gtest.h>

#include "bench/common/busy_intervals.h"

namespace tpserve::bench {
namespace {

TEST(BusyIntervals, UnionCountsOverlapOnceAndGapsNot) {
  std::vector<BusyInterval> none;
  EXPECT_EQ(union_ns(none), 0u);
  std::vector<BusyInterval> v = {{100, 200}, {150, 250}, {300, 400}, {310, 320},
                                 {400, 450}, {500, 500}, {700, 600}};
  EXPECT_EQ(union_ns(v), 150u + 150u);  // [100, 250) and [300, 450)
  std::vector<BusyInterval> unsorted = {{50, 60}, {0, 10}, {5, 20}};
  EXPECT_EQ(union_ns(unsorted), 20u + 10u);
}

}  // namespace
}  // namespace tpserve::bench
