// Percentiles (numpy's linear interpolation), summaries, and the paired-difference statistic of A/B rounds.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "bench/common/sample_stats.h"
#include "common/error.h"

namespace tpserve::bench {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

TEST(SampleStats, PercentileInterpolatesLikeNumpy) {
  const std::vector<double> v = {4, 1, 3, 2};  // sorted: 1 2 3 4
  EXPECT_DOUBLE_EQ(percentile(v, 0), 1);
  EXPECT_DOUBLE_EQ(percentile(v, 100), 4);
  EXPECT_DOUBLE_EQ(percentile(v, 50), 2.5);
  EXPECT_DOUBLE_EQ(percentile(v, 10), 1.3);  // numpy.percentile([1,2,3,4], 10)
  EXPECT_DOUBLE_EQ(percentile(v, 90), 3.7);
  EXPECT_DOUBLE_EQ(median({5}), 5);
  EXPECT_TRUE(std::isnan(median({})));
  EXPECT_THROW(percentile(v, 101), Error);
}

TEST(SampleStats, SummarizeGivesEveryField) {
  std::vector<double> v;
  for (int i = 1; i <= 101; ++i) v.push_back(i);
  const Distribution d = summarize(v);
  EXPECT_EQ(d.count, 101);
  EXPECT_DOUBLE_EQ(d.mean, 51);
  EXPECT_DOUBLE_EQ(d.median, 51);
  EXPECT_DOUBLE_EQ(d.p10, 11);
  EXPECT_DOUBLE_EQ(d.p90, 91);
  EXPECT_DOUBLE_EQ(d.p99, 100);
  EXPECT_DOUBLE_EQ(d.min, 1);
  EXPECT_DOUBLE_EQ(d.max, 101);
}

TEST(SampleStats, PairedDifferenceIsTheMedianOfPerRoundDifferences) {
  // b is slower by 1, 2, 3, -1, 2 ms in five rounds: median +2, sign held in 4 of 5.
  const std::vector<double> a = {10, 20, 10, 12, 11};
  const std::vector<double> b = {11, 22, 13, 11, 13};
  const PairedDifference p = paired_difference(a, b);
  EXPECT_EQ(p.rounds, 5);
  EXPECT_DOUBLE_EQ(p.median, 2);
  EXPECT_EQ(p.sign_held, 4);
  EXPECT_DOUBLE_EQ(p.sign_held_share(), 0.8);
  EXPECT_DOUBLE_EQ(p.a_median, 11);
  EXPECT_DOUBLE_EQ(p.relative(), 2.0 / 11);
}

TEST(SampleStats, PairedDifferenceSkipsRoundsWithoutSamples) {
  const PairedDifference p = paired_difference({1, kNaN, 3}, {2, 5, kNaN});
  EXPECT_EQ(p.rounds, 1);
  EXPECT_DOUBLE_EQ(p.median, 1);
  EXPECT_EQ(p.sign_held, 1);
  const PairedDifference none = paired_difference({}, {});
  EXPECT_EQ(none.rounds, 0);
  EXPECT_TRUE(std::isnan(none.median));
  EXPECT_DOUBLE_EQ(none.sign_held_share(), 0.0);
  const PairedDifference tie = paired_difference({1, 2}, {1, 2});
  EXPECT_EQ(tie.sign_held, 0);  // no difference: no sign to hold
  EXPECT_THROW(paired_difference({1}, {1, 2}), Error);
}

}  // namespace
}  // namespace tpserve::bench
