// The staged GEMV's plan (kernels::plan_gemv_staged): host arithmetic, runs without a GPU. The shapes of the
// Qwen3-30B-A3B decode step on an H200 as the CUDA backend sets the options, then properties of every plan
// over random shapes and options.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>

#include "kernels/gemv.h"
#include "kernels/launch.h"

namespace tpserve {
namespace {

using kernels::GemvLaunchOptions;
using kernels::GemvParams;
using kernels::GemvStagedPlan;

constexpr int kSms = 132;                          // H200
constexpr size_t kStagedSmem = size_t(216) << 10;  // CudaBackend's cap, 216 KiB (the H200's opt-in: 227)
constexpr size_t kReserved = kernels::SmLimits{}.reserved_smem_per_block;

// The options CudaBackend sets from the runtime defaults (runtime.staged_gemv_*).
GemvLaunchOptions backend_options() {
  GemvLaunchOptions o;
  o.staged_sms = kSms;
  o.staged_smem = kStagedSmem;
  o.staged_blocks_per_sm = 3;
  o.staged_max_warps = 16;
  return o;
}

GemvParams shape(int m, int k, int n) {
  GemvParams p;
  p.m = m, p.k = k, p.n = n;
  return p;
}

// Bytes of one 16-row tile of the kernel's shared memory (rows padded by 32 bf16) and of one activation row.
size_t tile_bytes(int k) {
  return size_t(16) * (k + 32) * 2;
}
size_t row_bytes(int k) {
  return size_t(k + 32) * 2;
}

TEST(GemvStagedPlan, QkvProjectionIsThreeSmallBlocksAnSm) {
  GemvStagedPlan plan;
  ASSERT_TRUE(kernels::plan_gemv_staged(shape(1, 2048, 5120), backend_options(), plan));
  EXPECT_EQ(plan.blocks, 320);
  EXPECT_EQ(plan.tiles_per_block, 1);
  EXPECT_EQ(plan.k_splits, 10);  // 32 warps' registers over the 3 blocks an SM holds
  EXPECT_TRUE(plan.x_shared);
  EXPECT_EQ(plan.smem, tile_bytes(2048) + row_bytes(2048));  // 70720: three fit in the SM with their reserve
  EXPECT_LE(3 * (plan.smem + kReserved), kernels::SmLimits{}.smem);
}

TEST(GemvStagedPlan, OProjectionHonoursTheWarpCap) {
  GemvLaunchOptions o = backend_options();
  GemvStagedPlan plan;
  ASSERT_TRUE(kernels::plan_gemv_staged(shape(1, 4096, 2048), o, plan));
  EXPECT_EQ(plan.blocks, 128);
  EXPECT_EQ(plan.warps(), 16);
  EXPECT_TRUE(plan.x_shared);
  EXPECT_EQ(plan.smem, tile_bytes(4096) + row_bytes(4096));
  o.staged_max_warps = 32;
  ASSERT_TRUE(kernels::plan_gemv_staged(shape(1, 4096, 2048), o, plan));
  EXPECT_EQ(plan.warps(), 32);  // 128 k blocks, at least 4 a warp
}

// 16 rows of QKV: the activations do not fit beside the weights in a third of an SM, so the product reads
// them from global memory; without that option no plan fits (one block an SM: 3 tiles, 260 KiB).
TEST(GemvStagedPlan, ActivationsFromGlobalMemoryWhereTheyDoNotFit) {
  GemvLaunchOptions o = backend_options();
  GemvStagedPlan plan;
  ASSERT_TRUE(kernels::plan_gemv_staged(shape(16, 2048, 5120), o, plan));
  EXPECT_EQ(plan.blocks, 320);
  EXPECT_FALSE(plan.x_shared);
  EXPECT_EQ(plan.smem, tile_bytes(2048));
  o.staged_x_global = false;
  EXPECT_FALSE(kernels::plan_gemv_staged(shape(16, 2048, 5120), o, plan));
}

TEST(GemvStagedPlan, DeclinesWhatTheKernelCannotTake) {
  GemvStagedPlan plan;
  EXPECT_FALSE(kernels::plan_gemv_staged(shape(1, 2040, 512), backend_options(), plan));   // K % 32
  EXPECT_FALSE(kernels::plan_gemv_staged(shape(17, 2048, 512), backend_options(), plan));  // > 16 rows
  EXPECT_FALSE(kernels::plan_gemv_staged(shape(1, 8192, 512), backend_options(), plan));   // 257 KiB a tile
  GemvLaunchOptions off = backend_options();
  off.staged_sms = 0;
  EXPECT_FALSE(kernels::plan_gemv_staged(shape(1, 2048, 512), off, plan));
}

// Every plan over random shapes and options: the tiles covered once, one wave, the warps within the cap and
// the register budget of the blocks an SM holds, the shared memory of those blocks within the SM's, and the
// activations in shared memory exactly where they fit.
TEST(GemvStagedPlan, EveryPlanFitsOneWave) {
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  int planned = 0;
  for (int i = 0; i < 20000; ++i) {
    const int m = std::uniform_int_distribution<int>(1, 16)(rng);
    const int k = 32 * std::uniform_int_distribution<int>(1, 200)(rng);
    const int n = std::uniform_int_distribution<int>(1, 40000)(rng);
    GemvLaunchOptions o;
    o.staged_sms = std::uniform_int_distribution<int>(1, 160)(rng);
    o.staged_smem = size_t(std::uniform_int_distribution<int>(16, 227)(rng)) << 10;
    o.staged_blocks_per_sm = std::uniform_int_distribution<int>(1, 4)(rng);
    o.staged_max_warps = std::uniform_int_distribution<int>(1, 32)(rng);
    o.staged_x_global = std::uniform_int_distribution<int>(0, 1)(rng) == 1;
    GemvStagedPlan plan;
    if (!kernels::plan_gemv_staged(shape(m, k, n), o, plan)) continue;
    ++planned;
    const std::string what =
        "m " + std::to_string(m) + ", k " + std::to_string(k) + ", n " + std::to_string(n) + ", sms " +
        std::to_string(o.staged_sms) + ", smem " + std::to_string(o.staged_smem) + ", blocks/SM " +
        std::to_string(o.staged_blocks_per_sm) + ", max warps " + std::to_string(o.staged_max_warps) +
        ", x global " + std::to_string(o.staged_x_global);
    const int tiles = (n + 15) / 16, resident = (plan.blocks + o.staged_sms - 1) / o.staged_sms;
    ASSERT_GE(plan.tiles_per_block, 1) << what;
    ASSERT_GE(plan.k_splits, 1) << what;
    EXPECT_GE(plan.blocks * plan.tiles_per_block, tiles) << what;
    EXPECT_LT((plan.blocks - 1) * plan.tiles_per_block, tiles) << what;
    EXPECT_LE(resident, std::clamp(o.staged_blocks_per_sm, 1, 4)) << what;
    EXPECT_LE(plan.warps(), o.staged_max_warps) << what;
    EXPECT_LE(resident * plan.warps(), 32) << what;  // 64 registers a thread: 64 warps' worth, half an SM
    EXPECT_LE(plan.k_splits, k / 32) << what;
    EXPECT_LE(resident * (plan.smem + kReserved), o.staged_smem + kReserved) << what;
    EXPECT_GE(plan.x_offset, plan.tiles_per_block * tile_bytes(k)) << what;
    const size_t with_x = plan.x_offset + m * row_bytes(k);
    const size_t limit = (o.staged_smem + kReserved) / resident - kReserved;
    EXPECT_EQ(plan.x_shared, with_x <= limit) << what;
    EXPECT_EQ(plan.smem, plan.x_shared ? with_x : plan.x_offset) << what;
    if (!plan.x_shared) {
      EXPECT_TRUE(o.staged_x_global) << what;
    }
  }
  EXPECT_GT(planned, 1000);
}

}  // namespace
}  // namespace tpserve
