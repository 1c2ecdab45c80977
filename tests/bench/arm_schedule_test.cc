// The arm order of benchmark rounds: A B | B A for two arms, palindromes for more, every arm's mean
// position equal over each pair of rounds (linear drift cancels), and the sweep schedule's shape.
#include <gtest/gtest.h>

#include <map>

#include "bench/common/arm_schedule.h"

namespace tpserve::bench {
namespace {

TEST(ArmSchedule, TwoArmsRunABBA) {
  std::string seq;
  for (int r = 0; r < 4; ++r)
    for (int a : arm_order(2, r)) seq += static_cast<char>('A' + a);
  EXPECT_EQ(seq, "ABBAABBA");
}

TEST(ArmSchedule, ManyArmsArePalindromicAndBalanced) {
  for (int arms = 1; arms <= 6; ++arms) {
    std::vector<int> two_rounds = arm_order(arms, 0);
    const std::vector<int> second = arm_order(arms, 1);
    two_rounds.insert(two_rounds.end(), second.begin(), second.end());
    EXPECT_TRUE(std::equal(two_rounds.begin(), two_rounds.end(), two_rounds.rbegin())) << arms << " arms";
    std::map<int, int> position_sum;
    for (size_t p = 0; p < two_rounds.size(); ++p) position_sum[two_rounds[p]] += static_cast<int>(p);
    ASSERT_EQ(position_sum.size(), static_cast<size_t>(arms));
    for (const auto& [arm, sum] : position_sum) EXPECT_EQ(sum, 2 * arms - 1) << "arm " << arm;
  }
}

TEST(ArmSchedule, SweepRunsEveryArmOncePerRoundAndConcurrency) {
  const auto runs = sweep_schedule({4, 1}, 3, 2);
  ASSERT_EQ(runs.size(), 12u);
  EXPECT_EQ(runs.front().concurrency, 4);  // levels in the order given
  EXPECT_EQ(runs.back().concurrency, 1);
  std::map<std::tuple<int, int, int>, int> seen;
  for (const auto& r : runs) ++seen[{r.concurrency, r.round, r.arm}];
  EXPECT_EQ(seen.size(), 12u);
  EXPECT_EQ(runs[2].arm, 1);  // round 1 starts with arm B
  EXPECT_EQ(runs[2].position, 0);
}

}  // namespace
}  // namespace tpserve::bench
