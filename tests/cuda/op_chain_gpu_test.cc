// bench/op_chain on a small shape (GPU; skips without one): every launch mode gives the same output, and the
// captured graphs carry one more programmatic edge per layer in the PDL mode, into the consumer (site
// "other"), and none into it in the other two.
#include <gtest/gtest.h>

#include "bench/op_chain/case_runner.h"
#include "tests/cuda/op_test_util.h"

namespace tpserve::bench {
namespace {

TEST(OpChain, ModesAgreeAndThePdlModeAddsOneProgrammaticEdgePerLayer) {
  TPS_REQUIRE_CUDA_DEVICE();
  CudaBackendOptions options;
  options.workspace_bytes = size_t(16) << 20;
  options.arena_bytes = size_t(128) << 20;
  options.pdl.default_mode = kernels::PdlMode::kOn;  // router GEMM and top-k carry PDL on every device
  auto backend = make_cuda_backend(options);
  const ChainShape shape{8, 2, 64, 3};
  ChainBuffers buffers(*backend, shape, /*max_tokens=*/4, /*seed=*/7);
  ChainOptions o;
  o.rounds = 2;
  o.replays = 3;
  const CaseRun run = run_case(*backend, buffers, /*tokens=*/3, o);

  EXPECT_TRUE(run.outputs_match);
  EXPECT_EQ(run.router_gemm, "gemv");
  ASSERT_EQ(run.order.size(), 2u);
  EXPECT_EQ(run.order[1], (std::vector<int>{2, 1, 0}));
  const int L = shape.layers;
  for (LaunchMode mode : kLaunchModes) {
    const ModeRun& m = run.modes[static_cast<int>(mode)];
    SCOPED_TRACE(mode_name(mode));
    EXPECT_EQ(m.graph.kernel_nodes, 3 * L);
    EXPECT_EQ(m.graph.kernels_per_site.at("other"), L);  // the consumer, launched outside kernels/launch.h
    ASSERT_EQ(m.replay_us.size(), 2u);
    ASSERT_EQ(m.eager_us.size(), 2u);
    EXPECT_GT(m.replay_us[0], 0.0);
    EXPECT_GT(m.eager_us[1], 0.0);
    const auto into_consumer = m.graph.programmatic_edges_per_site.find("other");
    const int consumer_edges =
        into_consumer == m.graph.programmatic_edges_per_site.end() ? 0 : into_consumer->second;
    // Router GEMM (all but the graph's first kernel) and top-k always; the consumer only in the PDL mode.
    const bool pdl = mode == LaunchMode::kExPdl;
    EXPECT_EQ(consumer_edges, pdl ? L : 0);
    EXPECT_EQ(m.graph.programmatic_edges, (L - 1) + L + (pdl ? L : 0));
  }
  const auto summary = summarize_case(run);
  EXPECT_EQ(summary[static_cast<int>(LaunchMode::kExPdl)].extra_edges, L);
  EXPECT_EQ(summary[static_cast<int>(LaunchMode::kChevron)].extra_edges, 0);
}

}  // namespace
}  // namespace tpserve::bench
