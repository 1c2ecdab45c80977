// The model's routing record and the engine's step statistics on the tiny CPU model: recording changes no
// token, every MoE layer reports k distinct experts for one token and at most T * k for T, the cost model's
// resident bytes equal what the model loaded, and last_step_stats() tells prefill from decode and splits the
// step's time into host phases.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>

#include "bench/tp_decode/step_cost_model.h"
#include "parallel/communicator.h"
#include "runtime/config/config_parser.h"
#include "runtime/engine/engine.h"

namespace tpserve {
namespace {

Config tiny_config() {
  return load_config_file(std::string(TPSERVE_SOURCE_DIR) + "/configs/tiny.yaml",
                          {"runtime.backend=cpu", "runtime.max_batch=4", "runtime.max_seq_len=64"});
}

Request make_request(int64_t id, std::vector<int32_t> prompt, int max_tokens) {
  Request r;
  r.id = id;
  r.prompt = std::move(prompt);
  r.max_tokens = max_tokens;
  r.ignore_eos = true;
  return r;
}

TEST(RoutingStats, RecordingChangesNoTokenAndCountsDistinctExperts) {
  const Config config = tiny_config();
  auto comm_plain = parallel::make_single_rank_communicator();
  auto comm_recorded = parallel::make_single_rank_communicator();
  Engine plain(config, *comm_plain, make_cpu_backend());
  Engine recorded(config, *comm_recorded, make_cpu_backend(), EngineOptions{.record_routing = true});
  const ModelSpec& spec = recorded.spec();
  const int k = spec.num_experts_per_tok;

  const std::vector<int32_t> prompt = {11, 2024, 7, 99, 150000, 3};
  EXPECT_THROW(plain.model().last_step_routing(), Error);
  recorded.scheduler().add(make_request(1, prompt, 5));
  std::vector<int32_t> tokens;
  bool first = true;
  while (recorded.scheduler().has_work()) {
    for (const auto& e : recorded.step()) tokens.push_back(e.token);
    const RoutingStats r = recorded.model().last_step_routing();
    const int step_tokens = first ? static_cast<int>(prompt.size()) : 1;
    EXPECT_EQ(r.tokens, step_tokens);
    ASSERT_EQ(static_cast<int>(r.experts_hit.size()), spec.num_layers);
    for (int l = 0; l < spec.num_layers; ++l) {
      const auto& hit = r.experts_hit[l];
      EXPECT_TRUE(std::is_sorted(hit.begin(), hit.end()));
      EXPECT_EQ(std::adjacent_find(hit.begin(), hit.end()), hit.end());
      if (first) {
        EXPECT_GE(r.distinct_experts(l), k);
        EXPECT_LE(r.distinct_experts(l), std::min(spec.num_experts, step_tokens * k));
      } else {
        EXPECT_EQ(r.distinct_experts(l), k) << "one token picks k distinct experts";
      }
      for (int32_t e : hit) EXPECT_TRUE(e >= 0 && e < spec.num_experts);
    }
    first = false;
  }
  EXPECT_EQ(plain.generate(prompt, SamplingParams{}, 5, true), tokens);
}

TEST(RoutingStats, CostModelMatchesTheLoadedWeights) {
  auto comm = parallel::make_single_rank_communicator();
  Engine engine(tiny_config(), *comm, make_cpu_backend());
  const bench::StepCostModel cost(engine.spec(), engine.model().layout(),
                                  dtype_size(engine.backend().weight_dtype()),
                                  dtype_size(engine.backend().activation_dtype()));
  EXPECT_DOUBLE_EQ(cost.resident_weight_bytes(), static_cast<double>(engine.model().weight_bytes()));
}

TEST(EngineStepStats, PrefillThenDecode) {
  auto comm = parallel::make_single_rank_communicator();
  Engine engine(tiny_config(), *comm, make_cpu_backend());
  engine.scheduler().add(make_request(1, {1, 2, 3, 4, 5, 6, 7, 8}, 3));
  engine.step();
  StepStats s = engine.last_step_stats();
  EXPECT_EQ(s.tokens, 8);
  EXPECT_EQ(s.sequences, 1);
  EXPECT_EQ(s.samples, 1);
  EXPECT_TRUE(s.has_prefill());
  EXPECT_EQ(s.prefill_tokens, 8);
  EXPECT_EQ(s.context_tokens, 8);
  engine.scheduler().add(make_request(2, {9, 10}, 2));
  engine.step();  // request 1 decodes while request 2 is prefilled
  s = engine.last_step_stats();
  EXPECT_EQ(s.tokens, 3);
  EXPECT_EQ(s.decode_seqs, 1);
  EXPECT_EQ(s.prefill_seqs, 1);
  EXPECT_EQ(s.context_tokens, 9 + 2);
  engine.step();
  s = engine.last_step_stats();
  EXPECT_FALSE(s.has_prefill());
  EXPECT_EQ(s.decode_seqs, 2);
  EXPECT_EQ(s.context_tokens, 10 + 3);
  while (engine.scheduler().has_work()) engine.step();
  engine.step();  // idle
  EXPECT_EQ(engine.last_step_stats().tokens, 0);
}

// A step's wall time split into its host phases and the wait: each non-negative, the model's host work
// (the CPU backend computes while it enqueues) present, and together no more than the step's wall time.
TEST(EngineStepStats, HostPhasesAddUpToTheStep) {
  auto comm = parallel::make_single_rank_communicator();
  Engine engine(tiny_config(), *comm, make_cpu_backend());
  engine.scheduler().add(make_request(1, {1, 2, 3, 4}, 4));
  for (int i = 0; i < 3; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    engine.step();
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const StepStats s = engine.last_step_stats();
    for (double phase : {s.schedule_s, s.broadcast_s, s.enqueue_s, s.wait_s, s.complete_s})
      EXPECT_GE(phase, 0.0);
    EXPECT_GT(s.enqueue_s, 0.0);
    EXPECT_LE(s.schedule_s + s.broadcast_s + s.enqueue_s + s.wait_s + s.complete_s, wall + 1e-6);
  }
}

}  // namespace
}  // namespace tpserve
