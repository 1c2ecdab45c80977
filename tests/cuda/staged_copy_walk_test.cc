// runtime.staged_copy_walk (kernels/staged_tile.cuh): the staged kernels' weight copies stepped with a carry
// give the same bits as the copies placed by a division a piece, in each kernel that stages: the staged GEMV
// (k ranges of more and fewer than 32 pieces a row, one and three copy groups), the staged MoE down (warps
// with no k block at a small I) and the fused router.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "tests/cuda/op_test_util.h"

namespace tpserve::cuda_test {
namespace {

CudaBackendOptions walk_options(bool walk, int copy_groups = 1) {
  CudaBackendOptions options = test_backend_options();
  options.kernels.staged_copy_walk = walk;
  options.kernels.staged_gemv_copy_groups = copy_groups;
  return options;
}

// The GPU outputs `run` leaves, with the walk off and on, each on a fresh backend with the same seeded data.
using RunOp = std::function<std::vector<std::vector<float>>(Backends&, std::mt19937&)>;
void expect_same_bits(const std::string& what, const RunOp& run, int copy_groups = 1) {
  std::vector<std::vector<float>> outputs[2];
  for (int walk = 0; walk < 2; ++walk) {
    Backends b(walk_options(walk == 1, copy_groups));
    std::mt19937 rng(static_cast<uint32_t>(std::hash<std::string>()(what)));
    outputs[walk] = run(b, rng);
  }
  ASSERT_EQ(outputs[0].size(), outputs[1].size());
  for (size_t i = 0; i < outputs[0].size(); ++i)
    expect_close(what + ", output " + std::to_string(i), outputs[0][i], outputs[1][i], {0.0f, 0.0f});
}

TEST(StagedCopyWalk, StagedGemvGivesTheSameBits) {
  TPS_REQUIRE_CUDA_DEVICE();
  struct Shape {
    int m, n, k, copy_groups;
  };
  // QKV and O of the 30B shape at one and four tokens; K = 96 (3 pieces a warp's row), three copy groups.
  for (const Shape& s : {Shape{1, 5120, 2048, 1}, Shape{4, 2048, 4096, 1}, Shape{1, 5120, 2048, 3},
                         Shape{2, 100, 96, 1}, Shape{9, 1040, 512, 2}}) {
    const std::string what = "M " + std::to_string(s.m) + " N " + std::to_string(s.n) + " K " +
                             std::to_string(s.k) + " groups " + std::to_string(s.copy_groups);
    expect_same_bits(
        what,
        [&](Backends& b, std::mt19937& rng) {
          auto xv = uniform(rng, size_t(s.m) * s.k), wv = uniform(rng, size_t(s.n) * s.k, -0.05f, 0.05f);
          Pair x = b.bf16({s.m, s.k}, xv), w = b.bf16({s.n, s.k}, wv);
          Pair out = b.output(DType::kBF16, {s.m, s.n});
          b.gpu().linear(x.gpu, w.gpu, out.gpu);
          return std::vector<std::vector<float>>{b.floats(out.gpu)};
        },
        s.copy_groups);
  }
}

TEST(StagedCopyWalk, StagedMoeDownGivesTheSameBits) {
  TPS_REQUIRE_CUDA_DEVICE();
  struct Shape {
    int hidden, inter, experts, k;
  };
  // I = 768 (the 30B shape: 6 pieces a warp's row), I = 64 (two of four warps without a k block).
  for (const Shape& s : {Shape{2048, 768, 16, 8}, Shape{256, 64, 8, 2}}) {
    const std::string what = "MoE H " + std::to_string(s.hidden) + " I " + std::to_string(s.inter);
    expect_same_bits(what, [&](Backends& b, std::mt19937& rng) {
      const float w_scale = 1.0f / std::sqrt(static_cast<float>(s.hidden));
      auto xv = uniform(rng, size_t(s.hidden));
      auto guv = uniform(rng, size_t(s.experts) * 2 * s.inter * s.hidden, -2 * w_scale, 2 * w_scale);
      auto dv = uniform(rng, size_t(s.experts) * s.hidden * s.inter, -w_scale, w_scale);
      std::vector<int32_t> ids(s.k);
      std::vector<float> weights(s.k, 1.0f / s.k);
      for (int i = 0; i < s.k; ++i) ids[i] = (i * 5 + 3) % s.experts;  // distinct: 5 is prime to 16 and 8
      Pair x = b.bf16({1, s.hidden}, xv), gate_up = b.bf16({s.experts, 2 * s.inter, s.hidden}, guv);
      Pair down = b.bf16({s.experts, s.hidden, s.inter}, dv), id = b.i32({1, s.k}, ids);
      Pair w = b.f32({1, s.k}, weights), out = b.output(DType::kBF16, {1, s.hidden});
      b.gpu().moe_experts(x.gpu, gate_up.gpu, down.gpu, id.gpu, w.gpu, 0, out.gpu);
      return std::vector<std::vector<float>>{b.floats(out.gpu)};
    });
  }
}

TEST(StagedCopyWalk, FusedRouterGivesTheSameBits) {
  TPS_REQUIRE_CUDA_DEVICE();
  struct Shape {
    int tokens, hidden, experts, k;
  };
  for (const Shape& s : {Shape{1, 2048, 128, 8}, Shape{3, 96, 60, 4}}) {
    const std::string what = "router T " + std::to_string(s.tokens) + " H " + std::to_string(s.hidden);
    expect_same_bits(what, [&](Backends& b, std::mt19937& rng) {
      auto rv = uniform(rng, size_t(s.tokens) * s.hidden), xv = uniform(rng, size_t(s.tokens) * s.hidden);
      auto nv = uniform(rng, size_t(s.hidden), 0.5f, 1.5f);
      const float scale = 2.0f / std::sqrt(static_cast<float>(s.hidden));
      auto wv = uniform(rng, size_t(s.experts) * s.hidden, -scale, scale);
      Pair residual = b.bf16({s.tokens, s.hidden}, rv), x = b.bf16({s.tokens, s.hidden}, xv);
      Pair norm_w = b.bf16({s.hidden}, nv), router_w = b.bf16({s.experts, s.hidden}, wv);
      Pair normed = b.output(DType::kBF16, {s.tokens, s.hidden});
      Pair logits = b.output(DType::kF32, {s.tokens, s.experts});
      Pair weights = b.output(DType::kF32, {s.tokens, s.k}), ids = b.output(DType::kI32, {s.tokens, s.k});
      b.gpu().add_rmsnorm_route(residual.gpu, x.gpu, norm_w.gpu, 1e-6f, normed.gpu, router_w.gpu, logits.gpu,
                                s.k, true, weights.gpu, ids.gpu);
      std::vector<float> id_values;
      for (int32_t id : b.ints(ids.gpu)) id_values.push_back(static_cast<float>(id));
      return std::vector<std::vector<float>>{b.floats(residual.gpu), b.floats(normed.gpu),
                                             b.floats(logits.gpu), b.floats(weights.gpu), id_values};
    });
  }
}

}  // namespace
}  // namespace tpserve::cuda_test
