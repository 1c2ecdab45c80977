// kernels::blocks_beside (host arithmetic, runs without a GPU) on H200 limits: alone it is resident_blocks,
// and the decode step's neighbours give what docs/step_latency.md works out by hand.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "kernels/residency.h"

namespace tpserve {
namespace {

using kernels::BlockFootprint;

const kernels::SmLimits kH200;

// The Qwen3-30B-A3B decode step's blocks at one token (registers from ptxas at sm_90a, shared memory from
// the kernels' plans).
const BlockFootprint kAttention{167, 5584 + 69632, 128};  // tensor-core decode attention, head_dim 128
const BlockFootprint kAttentionCapped{128, 5584 + 69632, 128};
const BlockFootprint kQkv{47, 70720, 320};                           // staged GEMV, 10 warps, three an SM
const BlockFootprint kO16{47, 140352, 512}, kO32{47, 140352, 1024};  // staged GEMV, 16 or 32 warps
const BlockFootprint kDown{64, 25600, 128};                          // staged MoE down
const BlockFootprint kCombineNorm{186, 128, 256}, kCombineNorm2{128, 128, 256};  // combine RMSNorm

TEST(BlocksBeside, AloneIsResidentBlocks) {
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  for (int i = 0; i < 20000; ++i) {
    BlockFootprint b;
    b.regs_per_thread = std::uniform_int_distribution<int>(1, 255)(rng);
    b.threads = 32 * std::uniform_int_distribution<int>(1, 32)(rng);
    b.smem = std::uniform_int_distribution<size_t>(0, 232448)(rng);
    const auto fit = kernels::blocks_beside(kH200, kAttention, 0, b);
    EXPECT_EQ(fit.blocks, kernels::resident_blocks(kH200, b.regs_per_thread, 0, b.threads, b.smem))
        << b.regs_per_thread << " registers, " << b.threads << " threads, " << b.smem << " bytes";
  }
}

// The twenty-second session's finding: a 32-warp O projection block (48 register units of a sub-partition)
// does not fit beside a decode attention block (21), a 16-warp one does.
TEST(BlocksBeside, OProjectionBesideDecodeAttention) {
  auto fit = kernels::blocks_beside(kH200, kAttention, 1, kO32);
  EXPECT_EQ(fit.blocks, 0);
  EXPECT_EQ(std::string(fit.bound), "registers");
  EXPECT_EQ(kernels::blocks_beside(kH200, kAttention, 1, kO16).blocks, 1);
  // Beside two attention blocks no O block fits by shared memory, whatever the registers.
  fit = kernels::blocks_beside(kH200, kAttentionCapped, 2, kO16);
  EXPECT_EQ(fit.blocks, 0);
  EXPECT_EQ(std::string(fit.bound), "shared memory");
}

// Attention beside the QKV projection: beside two of its blocks it fits, beside three not, by shared memory
// (so capping attention's registers would not change that edge).
TEST(BlocksBeside, DecodeAttentionBesideQkvProjection) {
  EXPECT_EQ(kernels::blocks_beside(kH200, kQkv, 2, kAttention).blocks, 1);
  for (const BlockFootprint& attention : {kAttention, kAttentionCapped}) {
    const auto fit = kernels::blocks_beside(kH200, kQkv, 3, attention);
    EXPECT_EQ(fit.blocks, 0);
    EXPECT_EQ(std::string(fit.bound), "shared memory");
  }
  // Decode attention alone: three an SM, by registers uncapped and by shared memory capped.
  EXPECT_EQ(kernels::blocks_beside(kH200, kQkv, 0, kAttention).blocks, 3);
  EXPECT_EQ(kernels::blocks_beside(kH200, kQkv, 0, kAttentionCapped).blocks, 3);
}

// The combine's RMSNorm (8 warps) beside the MoE down blocks (one warp a sub-partition each): at 182
// registers (24 units a warp) it fits beside 2 of them, at 128 (two blocks an SM's launch bounds) beside 4.
TEST(BlocksBeside, CombineNormBesideMoeDown) {
  EXPECT_EQ(kernels::blocks_beside(kH200, kDown, 2, kCombineNorm).blocks, 1);
  EXPECT_EQ(kernels::blocks_beside(kH200, kDown, 3, kCombineNorm).blocks, 0);
  EXPECT_EQ(kernels::blocks_beside(kH200, kDown, 4, kCombineNorm2).blocks, 1);
  EXPECT_EQ(kernels::blocks_beside(kH200, kDown, 5, kCombineNorm2).blocks, 0);
}

TEST(BlocksBeside, OtherLimitsBind) {
  const BlockFootprint small{32, 0, 1024};
  auto fit = kernels::blocks_beside(kH200, small, 1, small);
  EXPECT_EQ(fit.blocks, 1);
  EXPECT_EQ(std::string(fit.bound), "threads");
  const BlockFootprint tiny{16, 0, 32};
  fit = kernels::blocks_beside(kH200, tiny, 30, tiny);
  EXPECT_EQ(fit.blocks, 2);
  EXPECT_EQ(std::string(fit.bound), "block slots");
  // Residents that do not fit themselves leave nothing.
  EXPECT_EQ(kernels::blocks_beside(kH200, kAttention, 4, tiny).blocks, 0);
}

// The QKV projection's 320 blocks on 132 SMs, three at most: 56 SMs hold three, 76 two; and the cases of an
// even grid, one past a wave (every SM full), fewer blocks than SMs, and an empty one.
TEST(SpreadEvenly, FewerOnSomeSmsWithinOneWave) {
  struct Case {
    int blocks, most, fewest, sms_with_most;
  };
  for (const Case& c : {Case{320, 3, 2, 56}, Case{264, 2, 2, 132}, Case{1000, 3, 3, 132},
                        Case{100, 1, 0, 100}, Case{0, 0, 0, 132}}) {
    const kernels::EvenSpread s = kernels::spread_evenly(c.blocks, 132, 3);
    EXPECT_EQ(s.most, c.most) << c.blocks << " blocks";
    EXPECT_EQ(s.fewest, c.fewest) << c.blocks << " blocks";
    EXPECT_EQ(s.sms_with_most, c.sms_with_most) << c.blocks << " blocks";
  }
}

}  // namespace
}  // namespace tpserve
