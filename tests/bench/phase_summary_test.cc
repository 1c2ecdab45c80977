// Phase marks of one launch (bench/common/phase_summary.h): which blocks and marks belong to the launch, the
// first and last block at each mark, the path of the block that ended last, and medians over steps.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "bench/common/phase_summary.h"

namespace tpserve::bench {
namespace {

constexpr int kMarks = 4;  // entry, -, wait returned, end
constexpr uint64_t kWindow = 1000000;

struct Buffer {
  explicit Buffer(int blocks) : marks(blocks * kMarks) {}
  void set(int block, int mark, uint64_t ns, int64_t clock, uint32_t grid) {
    marks[block * kMarks + mark] = TimedMark{ns, clock, grid};
  }
  std::vector<TimedMark> marks;
};

TEST(PhaseSummary, FirstLastAndTheCriticalBlockFromTheFirstWaitReturn) {
  Buffer b(4);
  // Three blocks of one launch: entries at 1000-1200 ns, waits return at 5000-5400, ends at 6000-9000.
  b.set(0, 0, 1000, 10, 3), b.set(0, 2, 5400, 100, 3), b.set(0, 3, 6000, 200, 3);
  b.set(1, 0, 1100, 50, 3), b.set(1, 2, 5000, 400, 3), b.set(1, 3, 9000, 900, 3);
  b.set(2, 0, 1200, 0, 3), b.set(2, 2, 5100, 300, 3);  // never reached the end
  const LaunchPhases p = summarize_launch(b.marks, kMarks, 2, kWindow);
  ASSERT_TRUE(p.present);
  EXPECT_EQ(p.launch_blocks, 3);
  EXPECT_EQ(p.t0_ns, 5000u);
  EXPECT_EQ(p.end_ns, 9000u);
  EXPECT_EQ(p.blocks, (std::vector<int>{3, 0, 3, 2}));
  EXPECT_DOUBLE_EQ(p.first_us[0], -4.0);
  EXPECT_DOUBLE_EQ(p.last_us[0], -3.8);
  EXPECT_TRUE(std::isnan(p.first_us[1]));
  EXPECT_DOUBLE_EQ(p.first_us[3], 1.0);
  EXPECT_DOUBLE_EQ(p.last_us[3], 4.0);
  // Block 1 ended last: its marks and the cycles between the ones it reached.
  EXPECT_DOUBLE_EQ(p.critical_us[0], -3.9);
  EXPECT_DOUBLE_EQ(p.critical_us[2], 0.0);
  EXPECT_DOUBLE_EQ(p.critical_us[3], 4.0);
  EXPECT_TRUE(std::isnan(p.critical_cycles[0]));
  EXPECT_DOUBLE_EQ(p.critical_cycles[2], 350.0);
  EXPECT_DOUBLE_EQ(p.critical_cycles[3], 500.0);
}

TEST(PhaseSummary, MarksAndBlocksOfEarlierLaunchesAreLeftOut) {
  Buffer b(6);
  // An earlier launch of 6 blocks left blocks 2..5 (entries near 1000 ns); the last launch has 2 blocks,
  // entering near 2,000,000 ns. Block 1's end mark is the earlier launch's (before its own entry).
  for (int i = 0; i < 6; ++i) b.set(i, 0, 1000 + i, 0, 6), b.set(i, 2, 3000, 0, 6), b.set(i, 3, 4000, 0, 6);
  b.set(0, 0, 2000000, 0, 2), b.set(0, 2, 2001000, 0, 2), b.set(0, 3, 2003000, 0, 2);
  b.set(1, 0, 2000100, 0, 2), b.set(1, 2, 2001500, 0, 2);
  const LaunchPhases p = summarize_launch(b.marks, kMarks, 2, kWindow);
  ASSERT_TRUE(p.present);
  EXPECT_EQ(p.launch_blocks, 2);
  EXPECT_EQ(p.blocks, (std::vector<int>{2, 0, 2, 1}));
  EXPECT_DOUBLE_EQ(p.last_us[2], 0.5);
  EXPECT_DOUBLE_EQ(p.last_us[3], 2.0);
  // An earlier launch with the same grid but entered more than the window before the last is left out too.
  Buffer same(2);
  same.set(0, 0, 5000000, 0, 2), same.set(0, 2, 5001000, 0, 2);
  same.set(1, 0, 1000, 0, 2), same.set(1, 2, 2000, 0, 2);
  EXPECT_EQ(summarize_launch(same.marks, kMarks, 2, kWindow).launch_blocks, 1);
}

TEST(PhaseSummary, NoLaunchWithoutAnEntryAndAWaitReturn) {
  Buffer none(3);
  EXPECT_FALSE(summarize_launch(none.marks, kMarks, 2, kWindow).present);
  Buffer no_wait(1);
  no_wait.set(0, 0, 1000, 0, 1);
  EXPECT_FALSE(summarize_launch(no_wait.marks, kMarks, 2, kWindow).present);
  EXPECT_FALSE(summarize_launch(no_wait.marks, kMarks, kMarks, kWindow).present);  // no such mark
}

TEST(PhaseSummary, MediansOverStepsAndTheGapsBetweenKernels) {
  PhaseAccumulator acc;
  for (uint64_t step = 0; step < 3; ++step) {
    Buffer a(1), b(1);
    const uint64_t base = 10000000 * (step + 1);
    a.set(0, 0, base, 0, 1), a.set(0, 2, base + 1000, 0, 1), a.set(0, 3, base + 3000 + 1000 * step, 0, 1);
    b.set(0, 0, base + 500, 0, 1), b.set(0, 2, base + 5000 + 1000 * step, 0, 1),
        b.set(0, 3, base + 7000, 0, 1);
    acc.add_step({{"a", {"entry", "x", "wait", "end"}, summarize_launch(a.marks, kMarks, 2, kWindow)},
                  {"b", {"entry", "x", "wait", "end"}, summarize_launch(b.marks, kMarks, 2, kWindow)}});
  }
  EXPECT_EQ(acc.steps(), 3);
  std::ostringstream out;
  acc.report(out);
  const std::string text = out.str();
  // a's end at 2, 3 and 4 us from its wait: median 3.00; the gap a -> b is 2 us every step.
  EXPECT_NE(text.find("end"), std::string::npos) << text;
  EXPECT_NE(text.find("3.00"), std::string::npos) << text;
  EXPECT_NE(text.find("gap a -> b: 2.00 us"), std::string::npos) << text;
  EXPECT_EQ(text.find(" x "), std::string::npos) << text;  // a mark no block reached is not listed
}

}  // namespace
}  // namespace tpserve::bench
