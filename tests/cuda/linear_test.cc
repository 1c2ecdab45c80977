// CUDA linear (GEMV for small M, cuBLASLt above) against the CPU reference, bf16 and f32 outputs, with the
// staged GEMV (weights in shared memory, where they fit) and without it.
#include <gtest/gtest.h>

#include <algorithm>

#include "common/dtype.h"
#include "kernels/gemv.h"
#include "tests/cuda/op_test_util.h"

namespace tpserve::cuda_test {
namespace {

struct LinearCase {
  int m, n, k;
};
void PrintTo(const LinearCase& c, std::ostream* os) {
  *os << "M" << c.m << " N" << c.n << " K" << c.k;
}

// Parameters: the case, f32 output, and the staged GEMV's copy groups (0: not staged); 2 and 4 groups run
// with 2 and 3 staged blocks an SM (runtime.staged_gemv_blocks_per_sm), 1 and 4 groups with at most 28 and 8
// warps a block (runtime.staged_gemv_max_warps). -4: 4 groups with one in flight before the wait
// (runtime.staged_gemv_groups_in_flight).
class LinearTest : public ::testing::TestWithParam<std::tuple<LinearCase, bool, int>> {};

TEST_P(LinearTest, MatchesCpu) {
  TPS_REQUIRE_CUDA_DEVICE();
  const auto [c, out_f32, variant] = GetParam();
  const int copy_groups = variant < 0 ? -variant : variant;
  std::mt19937 rng(c.m * 1000003 + c.n * 1009 + c.k + (out_f32 ? 7 : 0) + variant * 11);
  CudaBackendOptions options = test_backend_options();
  options.kernels.staged_gemv = copy_groups > 0;
  options.kernels.staged_gemv_copy_groups = std::max(copy_groups, 1);
  options.kernels.weights_l2_evict_first = copy_groups != 2;  // staged copies without the L2 hint too
  options.kernels.staged_gemv_blocks_per_sm = copy_groups == 4 ? 3 : copy_groups;  // several blocks an SM
  options.kernels.staged_gemv_max_warps = copy_groups == 1 ? 28 : copy_groups == 4 ? 8 : 32;  // fewer warps
  options.kernels.staged_gemv_groups_in_flight = variant < 0 ? 1 : 0;
  Backends b(options);
  auto xv = uniform(rng, size_t(c.m) * c.k), wv = uniform(rng, size_t(c.n) * c.k, -0.5f, 0.5f);
  Pair x = b.bf16({c.m, c.k}, xv), w = b.bf16({c.n, c.k}, wv);
  Pair out = b.output(out_f32 ? DType::kF32 : DType::kBF16, {c.m, c.n});
  b.cpu().linear(x.cpu, w.cpu, out.cpu);
  b.gpu().linear(x.gpu, w.gpu, out.gpu);
  const auto ref = cpu_floats(out.cpu);
  // fp32 accumulation in another order: tiny absolute error; bf16 output adds a relative 2^-9.
  const float scale = rms(ref);
  const Tolerance tol = out_f32 ? Tolerance{1e-4f * scale + 1e-5f, 1e-4f} : Tolerance{2e-3f * scale, 8e-3f};
  expect_close("linear M=" + std::to_string(c.m) + " N=" + std::to_string(c.n) + " K=" + std::to_string(c.k),
               ref, b.floats(out.gpu), tol);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, LinearTest,
    ::testing::Combine(
        ::testing::Values(LinearCase{1, 96, 96}, LinearCase{3, 130, 96}, LinearCase{8, 1000, 2048},
                          LinearCase{9, 200, 2048}, LinearCase{16, 2048, 4096}, LinearCase{17, 520, 2048},
                          LinearCase{64, 384, 96}, LinearCase{1, 5120, 2048}, LinearCase{2, 4099, 264},
                          LinearCase{1, 2048, 4096}, LinearCase{5, 128, 2048}, LinearCase{16, 2056, 96},
                          LinearCase{2, 4100, 64},
                          LinearCase{12, 4100, 1024},  // staged: 2 tiles a block, 2 token tiles
                          // staged, the activations from global memory (beyond shared memory beside the
                          // weights): QKV at 8 and 16 rows, O at 16 (and 16, 2048, 4096 above)
                          LinearCase{8, 5120, 2048}, LinearCase{16, 5120, 2048},
                          LinearCase{1, 16384, 2048}),  // 64 MiB of weights: cuBLASLt at one row
        ::testing::Bool(), ::testing::Values(0, 1, 2, 4, -4)),
    [](const auto& test) {
      const LinearCase& c = std::get<0>(test.param);
      return "M" + std::to_string(c.m) + "N" + std::to_string(c.n) + "K" + std::to_string(c.k) +
             (std::get<1>(test.param) ? "_f32" : "_bf16") +
             (std::get<2>(test.param) > 0   ? "_staged" + std::to_string(std::get<2>(test.param))
              : std::get<2>(test.param) < 0 ? "_throttled" + std::to_string(-std::get<2>(test.param))
                                            : "");
    });

// runtime.norm_next_gemv_trigger_early_max_rows: the staged GEMV right after a norm triggers before its wait,
// so the GEMV after it starts while the norm may still run. The chain norm -> linear -> linear against the
// CPU, and the same bits as without the early trigger (fresh data for each row count); only that GEMV
// triggers early, and not with another launch between the norm and it.
TEST(Linear, StagedTriggerBeforeWaitAfterNorm) {
  TPS_REQUIRE_CUDA_DEVICE();
  constexpr int kHidden = 2048, kMid = 1536, kOut = 1000;
  for (int m : {1, 5, 16}) {
    std::mt19937 rng(4200 + m);
    auto xv = uniform(rng, size_t(m) * kHidden, -3.0f, 3.0f), nv = uniform(rng, kHidden, 0.5f, 1.5f);
    auto w1v = uniform(rng, size_t(kMid) * kHidden, -0.5f, 0.5f), w2v = uniform(rng, size_t(kOut) * kMid);
    std::vector<float> got[2];
    for (int early : {0, 1}) {
      CudaBackendOptions options = test_backend_options();
      options.kernels.norm_next_gemv_trigger_early_max_rows = early ? 16 : 0;
      Backends b(options);
      kernels::GemvParams first;
      first.m = m, first.n = kMid, first.k = kHidden;
      kernels::GemvStagedPlan plan;
      ASSERT_TRUE(kernels::plan_gemv_staged(first, b.gpu().gemv_launch_options(), plan))
          << "M=" << m << ": the GEMV after the norm must take the staged kernel";
      Pair x = b.bf16({m, kHidden}, xv), norm_w = b.bf16({kHidden}, nv);
      Pair w1 = b.bf16({kMid, kHidden}, w1v), w2 = b.bf16({kOut, kMid}, w2v);
      Pair normed = b.output(DType::kBF16, {m, kHidden}), mid = b.output(DType::kBF16, {m, kMid});
      Pair out = b.output(DType::kF32, {m, kOut});
      for (const bool gpu : {false, true}) {
        Backend& backend = gpu ? static_cast<Backend&>(b.gpu()) : b.cpu();
        auto on = [gpu](const Pair& t) { return gpu ? t.gpu : t.cpu; };
        backend.rmsnorm(on(x), on(norm_w), 1e-6f, on(normed));
        backend.linear(on(normed), on(w1), on(mid));
        backend.linear(on(mid), on(w2), on(out));
      }
      got[early] = b.floats(out.gpu);
      // Only the GEMV right after the norm triggers early, and none where another launch comes between.
      EXPECT_EQ(b.gpu().gemv_early_trigger_launches(), early ? 1u : 0u) << "M=" << m;
      b.gpu().rmsnorm(x.gpu, norm_w.gpu, 1e-6f, normed.gpu);
      b.gpu().add(normed.gpu, x.gpu);
      b.gpu().linear(normed.gpu, w1.gpu, mid.gpu);
      EXPECT_EQ(b.gpu().gemv_early_trigger_launches(), early ? 1u : 0u) << "M=" << m << ", an add between";
      const auto ref = cpu_floats(out.cpu);
      // Two bf16 roundings (the norm's and the first product's) before an fp32 product.
      const float scale = rms(ref);
      expect_close("norm -> linear -> linear, M=" + std::to_string(m) + (early ? ", early trigger" : ""), ref,
                   got[early], {2e-2f * scale, 2e-2f});
    }
    expect_close("M=" + std::to_string(m) + ": the early trigger against none, the same bits", got[0], got[1],
                 {0.0f, 0.0f});
  }
}

// Repeated shapes reuse the cached cuBLASLt plan and give the same result.
TEST(Linear, CublasPlanReuseIsDeterministic) {
  TPS_REQUIRE_CUDA_DEVICE();
  std::mt19937 rng(77);
  Backends b;
  auto xv = uniform(rng, 40 * 256), wv = uniform(rng, 300 * 256);
  Pair x = b.bf16({40, 256}, xv), w = b.bf16({300, 256}, wv);
  Pair out = b.output(DType::kF32, {40, 300});
  b.gpu().linear(x.gpu, w.gpu, out.gpu);
  const auto first = b.floats(out.gpu);
  b.poison(out.gpu);
  b.gpu().linear(x.gpu, w.gpu, out.gpu);
  expect_close("second run", first, b.floats(out.gpu), {0.0f, 0.0f});
}

}  // namespace
}  // namespace tpserve::cuda_test
