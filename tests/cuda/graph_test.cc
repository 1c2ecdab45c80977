// Decode steps as CUDA graphs on the GPU: replaying the padded bucket graphs gives the eager path's greedy
// tokens (every bucket, padding rows present, with and without MTP speculation); replays allocate nothing;
// under PDL `auto` every enrolled launch that follows a kernel becomes a programmatic edge, `off` leaves
// none, and switching one site (topk_gating) off removes exactly its edges. (The report attributes a kernel
// to one site; rmsnorm and add_rmsnorm share a kernel, which is why this test switches a site with a kernel
// of its own.)
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "kernels/launch.h"
#include "kernels/residency.h"
#include "parallel/communicator.h"
#include "runtime/backend/cuda/cuda_backend.h"
#include "runtime/backend/cuda/device_memory.h"
#include "runtime/engine/engine.h"
#include "tests/cuda/op_test_util.h"
#include "tests/cuda/small_gpu_engine.h"

namespace tpserve::cuda_test {
namespace {

struct GpuEngine {
  std::unique_ptr<parallel::Communicator> comm = parallel::make_single_rank_communicator();
  std::unique_ptr<Engine> engine;
  explicit GpuEngine(const std::vector<std::string>& overrides, const EngineOptions& options = {})
      : engine(gpu_test_engine(*comm,
                               "model: {synthetic: {preset: tiny, seed: 3, vocab: 4096, mtp: true}}\n"
                               "runtime: {backend: cuda, max_batch: 8, max_seq_len: 256}\n"
                               "cuda_graph: {capture_sizes: [1, 2, 4, 8]}\n",
                               overrides, size_t(4) << 30, options)) {}  // several engines share the GPU
};

// n requests decoded together to completion (greedy, `len` tokens each): the per-request tokens.
std::vector<std::vector<int32_t>> decode_together(Engine& e, int n, int len) {
  std::vector<Request> requests(n);
  for (int i = 0; i < n; ++i) {
    requests[i].prompt = {11 + i, 200 + 7 * i, 3000 - i, 42};
    requests[i].max_tokens = len;
    requests[i].ignore_eos = true;
  }
  return e.generate_together(std::move(requests));
}

TEST(CudaGraphs, ReplayGivesTheEagerTokensInEveryBucket) {
  TPS_REQUIRE_CUDA_DEVICE();
  for (const char* spec : {"speculative.method=none", "speculative.method=mtp"}) {
    std::vector<std::string> base = {spec};
    if (std::string(spec).find("mtp") != std::string::npos)
      base.push_back("speculative.num_speculative_tokens=2");
    auto eager_overrides = base;
    eager_overrides.push_back("cuda_graph.enabled=false");
    GpuEngine eager(eager_overrides), graphs(base);
    ASSERT_EQ(graphs.engine->model().graph_reports().size(), 4u);
    for (int n : {1, 3, 8}) {  // 3 runs in the batch-4 graph with a padding sequence
      SCOPED_TRACE(std::string(spec) + ", " + std::to_string(n) + " sequences");
      const int64_t before = graphs.engine->model().graph_replays();
      const auto want = decode_together(*eager.engine, n, 32);
      const auto got = decode_together(*graphs.engine, n, 32);
      EXPECT_EQ(got, want);
      EXPECT_GT(graphs.engine->model().graph_replays(), before);
      EXPECT_EQ(eager.engine->model().graph_replays(), 0);
    }
    // Replays allocate nothing: only the eager engine's first use could have.
    const CudaAllocationStats a = cuda_allocation_stats();
    decode_together(*graphs.engine, 4, 8);
    EXPECT_EQ(cuda_allocation_stats().count, a.count);
    EXPECT_EQ(cuda_allocation_stats().bytes, a.bytes);
  }
}

// Attention's ranges merged by the O projection (runtime.attention_merge_in_o_max_ranges, on by default) in
// whole decode steps: ranges of 16 keys without the 64-key floor give the small preset's 5-36-key contexts
// 1-3 ranges, so one-sequence steps (MTP drafts included) merge in O, eagerly and replayed. Their tokens are
// those of attention merging every range; batches of 3 (a graph with a padding row) merge in attention.
TEST(CudaGraphs, MergeInOGivesTheTokensOfAttentionMerging) {
  TPS_REQUIRE_CUDA_DEVICE();
  for (const char* spec : {"speculative.method=none", "speculative.method=mtp"}) {
    std::vector<std::string> base = {"model.synthetic.preset=small", spec, "runtime.attention_split_keys=16",
                                     "runtime.attention_split_min_keys=0"};
    if (std::string(spec).find("mtp") != std::string::npos)
      base.push_back("speculative.num_speculative_tokens=2");
    auto eager_overrides = base;
    eager_overrides.push_back("cuda_graph.enabled=false");
    auto in_attention_overrides = eager_overrides;
    in_attention_overrides.push_back("runtime.attention_merge_in_o_max_ranges=0");
    auto merges = [](GpuEngine& g) {
      return dynamic_cast<CudaBackend&>(g.engine->backend()).gemv_attention_merge_launches();
    };
    const std::vector<int> batches = {1, 3};
    std::vector<std::vector<std::vector<int32_t>>> want;  // a batch's tokens, attention merging
    {
      GpuEngine in_attention(in_attention_overrides);  // two engines at a time on the GPU
      for (int n : batches) want.push_back(decode_together(*in_attention.engine, n, 32));
      EXPECT_EQ(merges(in_attention), 0u) << spec;
    }
    GpuEngine eager(eager_overrides), graphs(base);
    for (size_t i = 0; i < batches.size(); ++i) {
      SCOPED_TRACE(std::string(spec) + ", " + std::to_string(batches[i]) + " sequences");
      EXPECT_EQ(decode_together(*eager.engine, batches[i], 32), want[i]) << "merged in O, eagerly";
      EXPECT_EQ(decode_together(*graphs.engine, batches[i], 32), want[i]) << "merged in O, replayed";
    }
    EXPECT_GT(merges(eager), 0u) << spec << ": no O projection was given attention's partials";
    EXPECT_GT(merges(graphs), 0u) << spec << ": no captured O projection was given attention's partials";
  }
}

// MoE gate_up through bulk copies in every step (runtime.moe_gate_up_bulk_min_tokens=1), on the small preset
// (H = 256) and on two layers of the Qwen3-30B-A3B shape (H = 2048, and I = 768 for the staged down kernel):
// replayed steps, with and without MTP, give the eager steps' tokens, and replays allocate nothing.
TEST(CudaGraphs, GateUpBulkReplayGivesTheEagerTokens) {
  TPS_REQUIRE_CUDA_DEVICE();
  const std::vector<std::vector<std::string>> models = {
      {"model.synthetic.preset=small"}, {"model.synthetic.preset=qwen3-30b-a3b", "model.synthetic.layers=2"}};
  for (const auto& model : models)
    for (const char* spec : {"speculative.method=none", "speculative.method=mtp"}) {
      std::vector<std::string> base = model;
      base.push_back(spec);
      base.push_back("runtime.moe_gate_up_bulk_min_tokens=1");
      if (std::string(spec).find("mtp") != std::string::npos)
        base.push_back("speculative.num_speculative_tokens=2");
      auto eager_overrides = base;
      eager_overrides.push_back("cuda_graph.enabled=false");
      GpuEngine eager(eager_overrides), graphs(base);
      for (int n : {1, 3, 8}) {
        SCOPED_TRACE(model[0] + ", " + spec + ", " + std::to_string(n) + " sequences");
        EXPECT_EQ(decode_together(*graphs.engine, n, 32), decode_together(*eager.engine, n, 32));
      }
      const CudaAllocationStats a = cuda_allocation_stats();
      decode_together(*graphs.engine, 4, 8);
      EXPECT_EQ(cuda_allocation_stats().count, a.count);
    }
}

// The routing record (what benchmarks count the bytes of a step from) of a replayed decode step is that
// step's: the eager step's experts with one sequence (batch-1 graph, no padding) and with three (the batch-4
// graph's padding sequence routes too, but only the step's own rows are counted).
TEST(CudaGraphs, ReplayedStepsRecordTheirOwnRouting) {
  TPS_REQUIRE_CUDA_DEVICE();
  const EngineOptions record{.record_routing = true};
  GpuEngine eager({"speculative.method=none", "cuda_graph.enabled=false"}, record),
      graphs({"speculative.method=none"}, record);
  for (int n : {1, 3}) {
    SCOPED_TRACE(std::to_string(n) + " sequences");
    std::vector<RoutingStats> stats;
    for (GpuEngine* g : {&eager, &graphs}) {
      Engine& e = *g->engine;
      for (int i = 0; i < n; ++i)
        e.scheduler().add(Request{
            .id = 100 * n + i, .prompt = {5 + i, 77, 901 + 13 * i}, .max_tokens = 4, .ignore_eos = true});
      e.step();  // prefill (eager in both)
      const int64_t replays = e.model().graph_replays();
      e.step();  // the first decode step
      EXPECT_EQ(e.model().graph_replays() > replays, g == &graphs);
      stats.push_back(e.model().last_step_routing());
      EXPECT_EQ(stats.back().tokens, n);
      while (e.scheduler().has_work()) e.step();
    }
    ASSERT_EQ(stats[0].experts_hit.size(), stats[1].experts_hit.size());
    for (size_t l = 0; l < stats[0].experts_hit.size(); ++l) {
      EXPECT_EQ(stats[1].experts_hit[l], stats[0].experts_hit[l]) << "layer " << l;
    }
  }
}

GraphReport batch4_graph(const std::vector<std::string>& overrides) {
  GpuEngine g(overrides);
  for (const auto& [size, report] : g.engine->model().graph_reports())
    if (size == 4) return report;
  ADD_FAILURE() << "no batch-4 graph";
  return {};
}

TEST(CudaGraphs, ProgrammaticEdgesFollowThePdlPolicy) {
  TPS_REQUIRE_CUDA_DEVICE();
  const GraphReport automatic = batch4_graph({"launch.pdl.default=auto"});
  const GraphReport off = batch4_graph({"launch.pdl.default=off"});
  const GraphReport no_topk = batch4_graph({"launch.pdl.default=auto", "launch.pdl.sites.topk_gating=off"});
  std::printf("auto: %s\n", automatic.format().c_str());
  // The H200 is SM90 and the kernels are built for sm_90a: auto enables PDL.
  EXPECT_GT(automatic.programmatic_edges, 0);
  EXPECT_EQ(automatic.programmatic_edges, automatic.pdl_kernel_nodes_after_kernel);
  EXPECT_EQ(off.programmatic_edges, 0);
  EXPECT_EQ(off.kernel_nodes, automatic.kernel_nodes);
  EXPECT_GT(automatic.programmatic_edges_per_site.at("topk_gating"), 0);
  EXPECT_EQ(no_topk.programmatic_edges_per_site.count("topk_gating"), 0u);
  for (const auto& [site, n] : automatic.programmatic_edges_per_site) {
    if (site == "topk_gating") continue;
    auto it = no_topk.programmatic_edges_per_site.find(site);
    ASSERT_NE(it, no_topk.programmatic_edges_per_site.end()) << site;
    EXPECT_EQ(it->second, n) << site;
  }
  EXPECT_EQ(no_topk.programmatic_edges,
            automatic.programmatic_edges - automatic.programmatic_edges_per_site.at("topk_gating"));
}

// The neighbours table: every kernel -> kernel edge of our kernels counted once, each launch as the graph
// holds it, the first's blocks spread over the device's SMs, and fewer of them leaving at least as much room.
TEST(CudaGraphs, NeighboursTableCoversTheKernelEdges) {
  TPS_REQUIRE_CUDA_DEVICE();
  const GraphReport r = batch4_graph({"launch.pdl.default=auto"});
  std::printf("%s\n", r.format().c_str());
  ASSERT_FALSE(r.neighbours.empty());
  const kernels::SmLimits sm = kernels::current_sm_limits();
  int edges = 0;
  for (const KernelNeighbours& n : r.neighbours) {
    const std::string what = n.first.kernel + " -> " + n.second.kernel;
    edges += n.count;
    EXPECT_GE(n.count, 1) << what;
    for (const KernelLaunchShape* k : {&n.first, &n.second}) {
      EXPECT_FALSE(k->kernel.empty()) << what;
      EXPECT_GE(k->blocks, 1) << what;
      EXPECT_GE(k->threads, 32) << what;
      EXPECT_GE(k->regs, 1) << what;
    }
    const int wave = kernels::resident_blocks(sm, n.first.regs, 0, n.first.threads, n.first.smem);
    EXPECT_GT(n.sms, 0) << what;
    EXPECT_LE(n.first_most, wave) << what;
    EXPECT_LE(n.first_most - n.first_fewest, 1) << what;
    EXPECT_GE(n.first_fewest, 0) << what;
    EXPECT_LE(n.sms_with_most, n.sms) << what;
    if (n.first.blocks < wave * n.sms) {  // within one wave every block is on some SM
      EXPECT_EQ(n.first_fewest * n.sms + (n.first_most - n.first_fewest) * n.sms_with_most, n.first.blocks)
          << what;
    }
    EXPECT_GE(n.beside_fewest, n.beside_most) << what;
    EXPECT_LE(n.beside_fewest,
              kernels::resident_blocks(sm, n.second.regs, 0, n.second.threads, n.second.smem))
        << what;
  }
  EXPECT_LE(edges, r.edges);
  // Every programmatic edge joins two kernels; those from another library's kernel (cuBLASLt's, one edge out
  // of each in the step's chain) may be left out.
  const auto library = r.kernels_per_site.find("library");
  EXPECT_GE(edges, r.programmatic_edges - (library == r.kernels_per_site.end() ? 0 : library->second));
  EXPECT_NE(r.format().find("beside"), std::string::npos);
}

}  // namespace
}  // namespace tpserve::cuda_test
