// Backend::add_rmsnorm_route on CUDA -- the residual add + RMSNorm, router and top-k gating in one cluster
// launch (runtime.router_fused_max_tokens, kernels/router_fused.h), and with the option off (three ops) --
// against the CPU's three ops.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <tuple>
#include <vector>

#include "kernels/router_fused.h"
#include "tests/cuda/op_test_util.h"

namespace tpserve::cuda_test {
namespace {

struct RouteCase {
  int tokens, hidden, experts, k;
  bool tied = false;  // router rows in equal pairs (2i + 1 = 2i): the logits tie, the smaller index wins
};
void PrintTo(const RouteCase& c, std::ostream* os) {
  *os << "T " << c.tokens << " H " << c.hidden << " E " << c.experts << " k " << c.k
      << (c.tied ? " tied" : "");
}

// The op's operands for a case on both backends, random (residual and x in [-2, 2], norm weights in
// [0.5, 1.5], router weights scaled for logits of a few units), and its outputs.
struct RouteOp {
  RouteCase c;
  Pair residual, x, norm_w, router_w, normed, logits, weights, ids;
  static constexpr float kEps = 1e-6f;

  RouteOp(Backends& b, std::mt19937& rng, const RouteCase& route_case) : c(route_case) {
    auto rv = uniform(rng, size_t(c.tokens) * c.hidden, -2.0f, 2.0f);
    auto xv = uniform(rng, size_t(c.tokens) * c.hidden, -2.0f, 2.0f);
    auto nv = uniform(rng, c.hidden, 0.5f, 1.5f);
    const float scale = 2.0f / std::sqrt(static_cast<float>(c.hidden));
    auto wv = uniform(rng, size_t(c.experts) * c.hidden, -scale, scale);
    if (c.tied)
      for (int e = 1; e < c.experts; e += 2)
        std::copy_n(wv.begin() + size_t(e - 1) * c.hidden, c.hidden, wv.begin() + size_t(e) * c.hidden);
    residual = b.bf16({c.tokens, c.hidden}, rv), x = b.bf16({c.tokens, c.hidden}, xv);
    norm_w = b.bf16({c.hidden}, nv), router_w = b.bf16({c.experts, c.hidden}, wv);
    normed = b.output(DType::kBF16, {c.tokens, c.hidden});
    logits = b.output(DType::kF32, {c.tokens, c.experts});
    weights = b.output(DType::kF32, {c.tokens, c.k}), ids = b.output(DType::kI32, {c.tokens, c.k});
  }
  void run(Backend& backend, bool gpu) const {
    auto side = [gpu](const Pair& pair) { return gpu ? pair.gpu : pair.cpu; };
    backend.add_rmsnorm_route(side(residual), side(x), side(norm_w), kEps, side(normed), side(router_w),
                              side(logits), c.k, true, side(weights), side(ids));
  }
};

// CudaBackendOptions with the fused router up to its most tokens, or never.
CudaBackendOptions route_options(bool fused) {
  CudaBackendOptions options = test_backend_options();
  options.kernels.router_fused_max_tokens = fused ? kernels::kRouterFusedMaxTokens : 0;
  return options;
}

bool device_has_clusters() {
  int sm_major = 0;
  EXPECT_EQ(cudaDeviceGetAttribute(&sm_major, cudaDevAttrComputeCapabilityMajor, 0), cudaSuccess);
  return sm_major >= 9;
}

class AddRmsNormRouteTest : public ::testing::TestWithParam<std::tuple<RouteCase, bool>> {};

TEST_P(AddRmsNormRouteTest, MatchesCpu) {
  TPS_REQUIRE_CUDA_DEVICE();
  const auto [c, fused] = GetParam();
  Backends b(route_options(fused));
  std::mt19937 rng(c.tokens * 31 + c.hidden * 7 + c.experts * 131 + c.k + (fused ? 5 : 0));
  const RouteOp op(b, rng, c);
  op.run(b.cpu(), false);
  op.run(b.gpu(), true);
  // The GPU keeps the residual in bf16 (the CPU in f32): the norm and the logits differ by that rounding.
  expect_close("residual", cpu_floats(op.residual.cpu), b.floats(op.residual.gpu), {1e-2f, 4e-3f});
  expect_close("normed", cpu_floats(op.normed.cpu), b.floats(op.normed.gpu), {1e-2f, 1e-2f});
  const std::vector<float> gpu_logits = b.floats(op.logits.gpu);
  expect_close("logits", cpu_floats(op.logits.cpu), gpu_logits, {3e-2f, 1e-2f});

  // The router saw the norm the gating stored: the CPU's product of the GPU's normed rows gives its logits
  // (up to the order of summation), and the CPU's gating of the GPU's logits its ids and weights.
  std::vector<float> gpu_normed = b.floats(op.normed.gpu);
  Pair normed_back = b.bf16({c.tokens, c.hidden}, gpu_normed);
  Pair logits_back = b.output(DType::kF32, {c.tokens, c.experts});
  b.cpu().linear(normed_back.cpu, op.router_w.cpu, logits_back.cpu);
  expect_close("logits of the stored norm", cpu_floats(logits_back.cpu), gpu_logits, {1e-4f, 1e-4f});
  Pair gpu_logits_back = b.f32({c.tokens, c.experts}, gpu_logits);
  Pair ref_w = b.output(DType::kF32, {c.tokens, c.k}), ref_ids = b.output(DType::kI32, {c.tokens, c.k});
  b.cpu().topk_gating(gpu_logits_back.cpu, c.k, true, ref_w.cpu, ref_ids.cpu);
  expect_equal("ids", cpu_ints(ref_ids.cpu), b.ints(op.ids.gpu));
  expect_close("weights", cpu_floats(ref_w.cpu), b.floats(op.weights.gpu), {1e-6f, 1e-4f});
}

// Kernel nodes of the op captured in a graph, fused or as three ops, at c's shape.
int route_kernel_nodes(bool fused, const RouteCase& c) {
  Backends b(route_options(fused));
  std::mt19937 rng(c.tokens + (fused ? 100 : 0));
  const RouteOp op(b, rng, c);
  auto graph = b.gpu().capture([&] { op.run(b.gpu(), true); });
  return graph == nullptr ? -1 : graph->report().kernel_nodes;
}

// Up to 16 tokens the fused op is one launch (on SM90+); beyond 16 it is the three ops.
TEST(AddRmsNormRoute, FusedIsOneLaunch) {
  TPS_REQUIRE_CUDA_DEVICE();
  if (!device_has_clusters()) GTEST_SKIP() << "the fused router needs thread-block clusters (SM90+)";
  auto shape = [](int tokens) { return RouteCase{tokens, 256, 64, 4}; };
  EXPECT_EQ(route_kernel_nodes(false, shape(1)), 3);
  EXPECT_EQ(route_kernel_nodes(true, shape(1)), 1);
  EXPECT_EQ(route_kernel_nodes(true, shape(16)), 1);
  EXPECT_EQ(route_kernel_nodes(true, shape(17)), route_kernel_nodes(false, shape(17)));
}

// The fused op's outputs (residual, normed, logits, weights, ids as floats) on random data seeded by `c`,
// with runtime.router_fused_stores_after_gather (and runtime.weights_l2_evict_first the same),
// runtime.topk_gating_redux, runtime.router_fused_push_logits and runtime.topk_gating_by_logits as given.
std::vector<std::vector<float>> fused_route_outputs(const RouteCase& c, bool stores_after_gather,
                                                    bool redux = false, bool push_logits = false,
                                                    bool by_logits = false) {
  CudaBackendOptions options = route_options(true);
  options.kernels.router_fused_stores_after_gather = stores_after_gather;
  options.kernels.topk_gating_redux = redux;
  options.kernels.topk_gating_by_logits = by_logits;
  options.kernels.router_fused_push_logits = push_logits;
  options.kernels.weights_l2_evict_first = stores_after_gather;
  Backends b(options);
  std::mt19937 rng(c.tokens * 37 + c.hidden * 11 + c.experts * 3 + c.k);  // the same data for both settings
  const RouteOp op(b, rng, c);
  op.run(b.gpu(), true);
  std::vector<float> id_values;
  for (int32_t id : b.ints(op.ids.gpu)) id_values.push_back(static_cast<float>(id));
  return {b.floats(op.residual.gpu), b.floats(op.normed.gpu), b.floats(op.logits.gpu),
          b.floats(op.weights.gpu), id_values};
}

// Blocks 1..7 storing the residual and normed columns after the gather, or every block before it: the same
// bits in every output, including hidden sizes whose columns do not cover all seven blocks. Every shape here
// takes the fused kernel (one launch), so the two orders are both exercised. Likewise the gating's arg-max
// rounds through warp reductions (runtime.topk_gating_redux) against the shuffle steps, with tied logits
// too (the smaller index first); the logits pushed into block 0's shared memory (one barrier, no
// gather: runtime.router_fused_push_logits), with expert counts that leave block rows empty (60, 100, 33);
// and the gating's rounds on the logits' order (runtime.topk_gating_by_logits) against the probabilities'.
TEST(AddRmsNormRoute, StoresAfterTheGatherAndReduxGatingGiveTheSameBits) {
  TPS_REQUIRE_CUDA_DEVICE();
  if (!device_has_clusters()) GTEST_SKIP() << "the fused router needs thread-block clusters (SM90+)";
  const char* names[] = {"residual", "normed", "logits", "weights", "ids"};
  for (const RouteCase& c : {RouteCase{1, 2048, 128, 8}, RouteCase{3, 2048, 128, 8}, RouteCase{8, 96, 60, 4},
                             RouteCase{16, 2048, 128, 8}, RouteCase{2, 4096, 64, 6}, RouteCase{2, 32, 16, 2},
                             RouteCase{12, 256, 100, 16}, RouteCase{1, 2048, 128, 8, true},
                             RouteCase{5, 256, 100, 16, true}, RouteCase{16, 96, 33, 3}}) {
    EXPECT_EQ(route_kernel_nodes(true, c), 1) << "not the fused kernel";
    const auto late = fused_route_outputs(c, true), early = fused_route_outputs(c, false);
    const auto redux = fused_route_outputs(c, true, true);
    const auto pushed = fused_route_outputs(c, true, true, true);
    const auto by_logits = fused_route_outputs(c, true, true, true, true);
    std::ostringstream shape;
    PrintTo(c, &shape);
    for (size_t i = 0; i < late.size(); ++i) {
      const std::string what = shape.str() + ": " + names[i];
      expect_close(what + ", stores after the gather and the L2 hint", early[i], late[i], {0.0f, 0.0f});
      expect_close(what + ", redux gating", late[i], redux[i], {0.0f, 0.0f});
      expect_close(what + ", logits pushed to block 0", redux[i], pushed[i], {0.0f, 0.0f});
      expect_close(what + ", gating by the logits", pushed[i], by_logits[i], {0.0f, 0.0f});
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, AddRmsNormRouteTest,
    ::testing::Combine(::testing::Values(RouteCase{1, 2048, 128, 8}, RouteCase{3, 2048, 128, 8},
                                         RouteCase{8, 96, 60, 4}, RouteCase{16, 2048, 128, 8},
                                         RouteCase{5, 4096, 512, 10}, RouteCase{17, 2048, 128, 8},
                                         RouteCase{2, 8192, 64, 6}, RouteCase{12, 256, 100, 16},
                                         RouteCase{9, 1024, 16, 1}, RouteCase{4, 2048, 128, 8, true}),
                       ::testing::Bool()));

}  // namespace
}  // namespace tpserve::cuda_test
