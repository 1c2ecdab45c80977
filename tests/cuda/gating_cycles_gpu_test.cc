// bench/gating_cycles (GPU; skips without one, except the argument checks): every timed pass of the gating,
// in either order (by the logits, by the probabilities) and with either warp reduction, picks the experts of
// the CPU reference (run_gating_cycles throws on a mismatch), and each pass reports a positive cycle count.
#include <gtest/gtest.h>

#include "bench/gating_cycles/gating_cycles_kernel.h"
#include "common/error.h"
#include "tests/cuda/op_test_util.h"

namespace tpserve::bench {
namespace {

TEST(GatingCycles, RejectsShapesOutsideTheKernel) {
  GatingCyclesCase c;
  c.experts = 129;
  EXPECT_THROW(run_gating_cycles(c, 1, 1), Error);
  c.experts = 16;
  c.k = 17;
  EXPECT_THROW(run_gating_cycles(c, 1, 1), Error);
  c.k = 8;
  c.reps = 0;
  EXPECT_THROW(run_gating_cycles(c, 1, 1), Error);
}

TEST(GatingCycles, EveryPassPicksTheCpuExperts) {
  TPS_REQUIRE_CUDA_DEVICE();
  for (bool by_logits : {true, false})
    for (bool redux : {true, false})
      for (int k : {1, 6, 16}) {
        GatingCyclesCase c;
        c.experts = k == 6 ? 40 : 128;
        c.k = k;
        c.by_logits = by_logits;
        c.redux = redux;
        c.reps = 3;
        const auto cycles = run_gating_cycles(c, 2, 11 + k);
        ASSERT_EQ(cycles.size(), 2u);
        for (const auto& launch : cycles)
          for (long long n : launch) EXPECT_GT(n, 0) << "k " << k << (by_logits ? " by logits" : "");
      }
}

}  // namespace
}  // namespace tpserve::bench
