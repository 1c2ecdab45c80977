// Phase marks of one launch (bench/common/phase_summary.h): which blocks and marks belong to the launch, the
// first and last block at each mark, the path of the block that ended last, and medians over steps.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "bench/common/phase_summary.h"

namespace tpserve::bench {
namespace {

constexpr int kMarks = 4;  // entry, -, wait returned, end

struct Buffer {
  explicit Buffer(int blocks) : marks(blocks * kMarks) {}
  void set(int block, int mark, uint64_t ns, int64_t clock, uint32_t grid) {
    marks[block * kMarks + mark] = kernels::PhaseMark{ns, clock, grid};
  }
  std::vector<kernels::PhaseMark> marks;
};

TEST(PhaseSummary, FirstLastAndTheCriticalBlockFromTheFirstWaitReturn) {
  Buffer b(4);
  // Three blocks of one launch: entries at 1000-1200 ns, waits return at 5000-5400, ends at 6000-9000.
  b.set(0, 0, 1000, 10, 3), b.set(0, 2, 5400, 100, 3), b.set(0, 3, 6000, 200, 3);
  b.set(1, 0, 1100, 50, 3), b.set(1, 2, 5000, 400, 3), b.set(1, 3, 9000, 900, 3);
  b.set(2, 0, 1200, 0, 3), b.set(2, 2, 5100, 300, 3);  // never reached the end
  const LaunchPhases p = summarize_launch(b.marks, kMarks, 2);
  ASSERT_TRUE(p.present);
  EXPECT_EQ(p.launch_blocks, 3);
  EXPECT_EQ(p.grid_blocks, 3);
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

TEST(PhaseSummary, BlocksOfAnEarlierLargerLaunchAreLeftOut) {
  // As the QKV projection (6 blocks here) then the O projection (2) share the staged GEMV's buffer: the
  // earlier launch's blocks 2..5 keep their marks, a few us before the last launch's.
  Buffer b(6);
  for (int i = 0; i < 6; ++i)
    b.set(i, 0, 10000 + i, 0, 6), b.set(i, 2, 12000, 0, 6), b.set(i, 3, 14000, 0, 6);
  b.set(0, 0, 20000, 0, 2), b.set(0, 2, 21000, 0, 2), b.set(0, 3, 23000, 0, 2);
  b.set(1, 0, 20100, 0, 2), b.set(1, 2, 21500, 0, 2), b.set(1, 3, 22000, 0, 2);
  const LaunchPhases p = summarize_launch(b.marks, kMarks, 2);
  ASSERT_TRUE(p.present);
  EXPECT_EQ(p.launch_blocks, 2);
  EXPECT_EQ(p.grid_blocks, 2);
  EXPECT_EQ(p.blocks, (std::vector<int>{2, 0, 2, 2}));
  EXPECT_EQ(p.t0_ns, 21000u);
  EXPECT_EQ(p.end_ns, 23000u);
}

TEST(PhaseSummary, AMarkTheBlockDidNotReachThisLaunchIsLeftOut) {
  // The same grid twice: block 1 reached its end mark in the earlier launch only.
  Buffer b(2);
  b.set(0, 0, 1000, 0, 2), b.set(0, 2, 2000, 0, 2), b.set(0, 3, 3000, 0, 2);
  b.set(1, 0, 1000, 0, 2), b.set(1, 2, 2000, 0, 2), b.set(1, 3, 9000, 0, 2);  // the earlier launch's
  b.set(0, 0, 20000, 0, 2), b.set(0, 2, 21000, 0, 2), b.set(0, 3, 22000, 0, 2);
  b.set(1, 0, 20100, 0, 2), b.set(1, 2, 21500, 0, 2);
  const LaunchPhases p = summarize_launch(b.marks, kMarks, 2);
  ASSERT_TRUE(p.present);
  EXPECT_EQ(p.blocks, (std::vector<int>{2, 0, 2, 1}));
  EXPECT_DOUBLE_EQ(p.last_us[3], 1.0);
  EXPECT_EQ(p.end_ns, 22000u);
}

TEST(PhaseSummary, NoLaunchWithoutAnEntryAndAWaitReturn) {
  Buffer none(3);
  EXPECT_FALSE(summarize_launch(none.marks, kMarks, 2).present);
  Buffer no_wait(1);
  no_wait.set(0, 0, 1000, 0, 1);
  EXPECT_FALSE(summarize_launch(no_wait.marks, kMarks, 2).present);
  EXPECT_FALSE(summarize_launch(no_wait.marks, kMarks, kMarks).present);  // no such mark
}

TEST(PhaseSummary, MediansOverStepsAndTheGapsBetweenKernels) {
  PhaseAccumulator acc;
  // a's end 2, 3 and 10 us after its wait (median 3, mean 5); b's wait 2 us after a's end every step.
  const uint64_t end_us[] = {2, 3, 10};
  for (uint64_t step = 0; step < 3; ++step) {
    Buffer a(1), b(1);
    const uint64_t base = 10000000 * (step + 1), a_end = base + 1000 + 1000 * end_us[step];
    a.set(0, 0, base, 0, 1), a.set(0, 2, base + 1000, 0, 1), a.set(0, 3, a_end, 0, 1);
    b.set(0, 0, base + 500, 0, 1), b.set(0, 2, a_end + 2000, 0, 1), b.set(0, 3, a_end + 4000, 0, 1);
    acc.add_step({{"a", {"entry", "x", "wait", "end"}, summarize_launch(a.marks, kMarks, 2)},
                  {"b", {"entry", "x", "wait", "end"}, summarize_launch(b.marks, kMarks, 2)}});
  }
  EXPECT_EQ(acc.steps(), 3);
  std::ostringstream out;
  acc.report(out);
  const std::string text = out.str();
  EXPECT_NE(text.find("3.00"), std::string::npos) << text;
  EXPECT_EQ(text.find("5.00"), std::string::npos) << text;  // not the mean
  EXPECT_NE(text.find("gap a -> b: 2.00 us"), std::string::npos) << text;
  // b's end from a's wait: a's end (2, 3, 10) + the gap (2) + b's end after its wait (2).
  EXPECT_NE(text.find("chain a -> b: 7.00 us"), std::string::npos) << text;
  EXPECT_EQ(text.find(" x "), std::string::npos) << text;       // a mark no block reached is not listed
  EXPECT_EQ(text.find("recorded"), std::string::npos) << text;  // every block recorded
  EXPECT_NE(text.find("of each kernel's last launch in the step;"), std::string::npos) << text;
  std::ostringstream layer;  // the launches named by the caller (tp_decode --phase-trace-layer)
  acc.report(layer, "layer 3's launches of each kernel");
  EXPECT_NE(layer.str().find("3 decode steps of layer 3's launches of each kernel;"), std::string::npos)
      << layer.str();
}

TEST(PhaseSummary, TheReportSaysWhenBlocksWereNotRecorded) {
  PhaseAccumulator acc;
  Buffer a(2);  // a launch of 5 blocks of which 2 were recorded
  a.set(0, 0, 1000, 0, 5), a.set(0, 2, 2000, 0, 5), a.set(1, 0, 1100, 0, 5), a.set(1, 2, 2100, 0, 5);
  acc.add_step({{"a", {"entry", "x", "wait", "end"}, summarize_launch(a.marks, kMarks, 2)}});
  std::ostringstream out;
  acc.report(out);
  EXPECT_NE(out.str().find("5 blocks in the launch, 2 recorded"), std::string::npos) << out.str();
}

}  // namespace
}  // namespace tpserve::bench
