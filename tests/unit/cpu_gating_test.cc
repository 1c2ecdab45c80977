// The CPU reference's top-k gating (runtime/backend/cpu/cpu_moe.cc), the order every backend's gating
// follows: the k largest logits, ties to the smaller index, a NaN logit as -inf, the picks' softmax
// probabilities renormalised to sum to one when asked.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "runtime/backend/cpu/cpu_ops.h"

namespace tpserve {
namespace {

struct Gated {
  std::vector<int32_t> ids;
  std::vector<float> weights;
};

Gated gate(std::vector<float> logits, int experts, int k, bool renormalize) {
  const int64_t tokens = static_cast<int64_t>(logits.size()) / experts;
  Gated g{std::vector<int32_t>(tokens * k), std::vector<float>(tokens * k)};
  cpu::topk_gating(Tensor(logits.data(), DType::kF32, Device::kCpu, {tokens, experts}), k, renormalize,
                   Tensor(g.weights.data(), DType::kF32, Device::kCpu, {tokens, k}),
                   Tensor(g.ids.data(), DType::kI32, Device::kCpu, {tokens, k}));
  return g;
}

TEST(CpuGating, PicksTheLargestLogitsWithTiesToTheSmallerIndex) {
  const Gated g = gate({1.0f, 3.0f, 2.0f, 3.0f, -1.0f}, 5, 3, false);
  EXPECT_EQ(g.ids, (std::vector<int32_t>{1, 3, 2}));
  const float sum = std::exp(-2.0f) + 1.0f + std::exp(-1.0f) + 1.0f + std::exp(-4.0f);
  EXPECT_FLOAT_EQ(g.weights[0], 1.0f / sum);
  EXPECT_FLOAT_EQ(g.weights[1], 1.0f / sum);
  EXPECT_FLOAT_EQ(g.weights[2], std::exp(-1.0f) / sum);
}

TEST(CpuGating, RenormalisesThePicks) {
  const Gated g = gate({0.0f, 1.0f, 2.0f, 3.0f, 0.0f, 0.0f, 0.0f, 5.0f}, 4, 2, true);
  EXPECT_EQ(g.ids, (std::vector<int32_t>{3, 2, 3, 0}));
  EXPECT_FLOAT_EQ(g.weights[0] + g.weights[1], 1.0f);
  EXPECT_NEAR(g.weights[0], 1.0f / (1.0f + std::exp(-1.0f)), 1e-6f);
  EXPECT_NEAR(g.weights[2], 1.0f / (1.0f + std::exp(-5.0f)), 1e-6f);
}

// Two different logits whose probabilities both round to 0 keep the logits' order, not the indices'.
TEST(CpuGating, OrdersByTheLogitsWhereProbabilitiesRoundEqual) {
  const Gated g = gate({0.0f, -201.0f, -200.0f, -300.0f}, 4, 3, false);
  EXPECT_EQ(g.weights[1], 0.0f);
  EXPECT_EQ(g.weights[2], 0.0f);
  EXPECT_EQ(g.ids, (std::vector<int32_t>{0, 2, 1}));
}

// A NaN logit counts as -inf: never picked before a number, and the others' probabilities stay numbers.
TEST(CpuGating, NanLogitCountsAsMinusInfinity) {
  const Gated g = gate({std::nanf(""), 0.0f, 1.0f, -INFINITY}, 4, 3, true);
  EXPECT_EQ(g.ids, (std::vector<int32_t>{2, 1, 0}));
  EXPECT_FALSE(std::isnan(g.weights[0]) || std::isnan(g.weights[1]));
  EXPECT_EQ(g.weights[2], 0.0f);
  EXPECT_FLOAT_EQ(g.weights[0] + g.weights[1], 1.0f);
}

}  // namespace
}  // namespace tpserve
