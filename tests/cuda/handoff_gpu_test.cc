// bench/handoff (GPU; skips without one, except the host arithmetic): every arm gives the same bits over a
// long chain with every stage's output poisoned before the checked run (a stage that read its input before
// the previous stage finished would read NaN or an older replay's values and differ), and a short chain
// matches a host reference.
#include <gtest/gtest.h>

#include <cmath>

#include "bench/handoff/handoff_run.h"
#include "common/cuda_check.h"
#include "common/dtype.h"
#include "tests/cuda/op_test_util.h"

namespace tpserve::bench {
namespace {

int device_sms() {
  int device = 0, sms = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return sms;
}

HandoffOptions options(int stages, int rounds, int replays, uint64_t seed) {
  HandoffOptions o;
  o.stages = stages;
  o.rounds = rounds;
  o.replays = replays;
  o.seed = seed;
  return o;
}

struct Stream {
  cudaStream_t s = nullptr;
  Stream() { CUDA_CHECK(cudaStreamCreate(&s)); }
  ~Stream() { cudaStreamDestroy(s); }
};

TEST(Handoff, RowsPerBlockDivideHiddenAndFillTheSmsOnce) {
  EXPECT_EQ(handoff_rows_per_block(2048, 132), 16);  // 128 blocks
  EXPECT_EQ(handoff_rows_per_block(1024, 132), 8);
  EXPECT_EQ(handoff_rows_per_block(1000, 132), 8);  // 125 blocks
  EXPECT_EQ(handoff_rows_per_block(96, 132), 1);
  EXPECT_EQ(handoff_rows_per_block(97, 10), 97);  // a prime: one block
  for (int hidden : {64, 1024, 1032, 2048, 2560}) {
    const int rows = handoff_rows_per_block(hidden, 114);
    EXPECT_EQ(hidden % rows, 0) << hidden;
    EXPECT_LE(hidden / rows, 114) << hidden;
  }
}

// Some blocks of every stage sleep before storing their rows, and every round's checked run starts from
// poisoned outputs: a stage that read its input before the stage before it finished would read NaN.
TEST(Handoff, ArmsGiveTheSameBitsOverALongChain) {
  TPS_REQUIRE_CUDA_DEVICE();
  HandoffOptions o = options(/*stages=*/96, /*rounds=*/4, /*replays=*/3, /*seed=*/11);
  o.skew = true;
  Stream stream;
  const HandoffCase c = run_handoff_case(1024, o, device_sms(), stream.s);
  EXPECT_TRUE(c.outputs_match);
  int finite = 0;
  for (uint16_t v : c.out[0]) finite += std::isfinite(bf16_to_f32(v)) ? 1 : 0;
  EXPECT_EQ(finite, 1024);  // no poisoned input reached the end
  for (int a = 0; a < kNumHandoffArms; ++a) {
    SCOPED_TRACE(handoff_arm_name(kHandoffArms[a]));
    ASSERT_EQ(c.us[a].size(), 4u);
    EXPECT_GT(c.us[a][1], 0.0);
  }
  EXPECT_EQ(c.order[1], (std::vector<int>{5, 4, 3, 2, 1, 0}));
}

// The negative control: a persistent grid that never waits for the counter reads inputs before they are
// written, and the check sees it.
TEST(Handoff, AHandoffThatDoesNotWaitIsCaught) {
  TPS_REQUIRE_CUDA_DEVICE();
  HandoffOptions o = options(/*stages=*/96, /*rounds=*/1, /*replays=*/1, /*seed=*/11);
  o.skew = true;
  o.skip_waits = true;
  Stream stream;
  const HandoffCase c = run_handoff_case(1024, o, device_sms(), stream.s);
  EXPECT_FALSE(c.outputs_match);
  const auto& reference = c.out[static_cast<int>(HandoffArm::kKernelsPdl)];
  EXPECT_EQ(c.out[static_cast<int>(HandoffArm::kKernels)], reference);  // the kernel arms still wait
  EXPECT_EQ(c.out[static_cast<int>(HandoffArm::kKernelsPdlAlone)], reference);
  for (HandoffArm arm :
       {HandoffArm::kPersistent, HandoffArm::kPersistent2Buf, HandoffArm::kPersistentRelaxed})
    EXPECT_NE(c.out[static_cast<int>(arm)], reference) << handoff_arm_name(arm);
}

TEST(Handoff, ShortChainMatchesTheHostReference) {
  TPS_REQUIRE_CUDA_DEVICE();
  const HandoffOptions o = options(/*stages=*/3, /*rounds=*/1, /*replays=*/1, /*seed=*/5);
  const int hidden = 1000;  // 125 blocks of 8 rows on 132 SMs: not a power of two
  Stream stream;
  const HandoffCase c = run_handoff_case(hidden, o, device_sms(), stream.s);
  const std::vector<uint16_t> w = handoff_weights_host(hidden, o.stages, o.seed);
  std::vector<float> x(hidden);
  const std::vector<uint16_t> x0 = handoff_input_host(hidden, o.seed);
  for (int i = 0; i < hidden; ++i) x[i] = bf16_to_f32(x0[i]);
  const float scale = std::sqrt(3.0f / static_cast<float>(hidden));
  for (int s = 0; s < o.stages; ++s) {
    std::vector<float> y(hidden);
    for (int r = 0; r < hidden; ++r) {
      double sum = 0;
      for (int k = 0; k < hidden; ++k)
        sum += double(bf16_to_f32(w[(size_t(s) * hidden + r) * hidden + k])) * x[k];
      y[r] = bf16_to_f32(f32_to_bf16(static_cast<float>(sum) * scale));
    }
    x = y;
  }
  for (int a = 0; a < kNumHandoffArms; ++a) {
    SCOPED_TRACE(handoff_arm_name(kHandoffArms[a]));
    int bad = 0;
    for (int i = 0; i < hidden; ++i) {
      const float got = bf16_to_f32(c.out[a][i]);
      if (!(std::fabs(got - x[i]) <= 2e-2f + 2e-2f * std::fabs(x[i])) && bad++ < 5)
        ADD_FAILURE() << "x_3[" << i << "] = " << got << ", reference " << x[i];
    }
    EXPECT_EQ(bad, 0);
  }
}

}  // namespace
}  // namespace tpserve::bench
