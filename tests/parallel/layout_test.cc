// Every parallel layout on the CPU backend under mpirun (np 1, 2, 4): tensor-parallel attention with a
// vocab-parallel embedding and lm_head, and MoE TP-sharded, expert-parallel with all-reduce, or expert-
// parallel with all-to-all dispatch. Each must give the single-rank logits (1e-5 relative L2), greedy
// tokens and seeded samples (drawn on the prompt blocks the greedy run left in the prefix cache), and
// log-probabilities (merged from every rank's vocabulary slice), and tokens under logit bias and penalties
// (applied on each rank's slice), and under a structured-output rule (its token masks too), on the
// transformers fixtures and on a synthetic model. A skewed-routing checkpoint (every token to experts 0 and
// 1, both on rank 0) proves the all-to-all drops nothing.
#include <gtest/gtest.h>
#include <mpi.h>

#include <filesystem>

#include "parallel/mpi_communicator.h"
#include "runtime/engine/engine.h"
#include "tests/model/model_test_util.h"
#include "tests/parallel/drive_or_follow.h"
#include "tests/parallel/layouts.h"
#include "tests/parallel/mpi_test_env.h"
#include "tests/parallel/skewed_checkpoint.h"
#include "tests/unit/modulo_constraint.h"

namespace tpserve {
namespace {

using namespace testing_util;

struct Outcome {
  std::vector<float> logits;
  std::vector<int32_t> greedy;
  std::vector<int32_t> sampled;
  int64_t prefix_hits = 0;              // prompt tokens the sampled run found cached by the greedy one
  std::vector<TokenLogprobs> logprobs;  // a greedy run's, top 3 (vocab-parallel: merged from every rank)
  std::vector<int32_t> processed;       // greedy under logit bias, penalties and min_tokens
  std::vector<int32_t> constrained;     // greedy under a structured-output rule (ModuloConstraint(5, 8))
};

const SamplingParams kSampling{.temperature = 0.8f, .top_k = 20, .top_p = 0.9f, .min_p = 0.0f, .seed = 7};

// Runs the three checks on an engine; on followers serves until the driver stops them.
Outcome exercise(Engine& engine, const std::vector<int32_t>& sequence, int prompt_len) {
  Outcome o;
  drive_or_follow(engine, [&] {
    const int n = static_cast<int>(sequence.size());
    o.logits = engine.run_batch(sequence_step(sequence, 0, n, 4, true), true).logits;
    const std::vector<int32_t> prompt(sequence.begin(), sequence.begin() + prompt_len);
    o.greedy = engine.generate(prompt, SamplingParams{}, 12, true);
    o.sampled = engine.generate(prompt, kSampling, 12, true);
    o.prefix_hits = engine.scheduler().prefix_cache_metrics().hit_tokens;
    engine.scheduler().add(
        Request{.id = 99, .prompt = prompt, .max_tokens = 6, .ignore_eos = true, .logprobs = 3});
    while (engine.scheduler().has_work())
      for (const TokenEvent& e : engine.step())
        if (e.logprobs) o.logprobs.push_back(*e.logprobs);
    // Adjustments land in whichever rank's vocabulary slice holds their token: the greedy run's tokens
    // biased away, penalties over the prompt's and the output's tokens, a stop token masked.
    Request r{.id = 0, .prompt = prompt, .max_tokens = 12, .ignore_eos = true};
    r.stop_token_ids = {o.greedy[2]};
    r.processing = {.logit_bias = {{o.greedy[0], -100.0f}, {o.greedy[1], -50.0f}},
                    .repetition_penalty = 0.5f,
                    .frequency_penalty = 0.3f,
                    .presence_penalty = 0.4f,
                    .min_tokens = 4};
    o.processed = engine.generate_together({r}).front();
    // Token masks: each rank masks its own slice of the vocabulary.
    Request c{.id = 1, .prompt = prompt, .max_tokens = 12, .ignore_eos = true};
    c.constraint = std::make_shared<ModuloConstraint>(5, 8);
    o.constrained = engine.generate_together({c}).front();
  });
  return o;
}

Config model_config(const std::string& model_yaml, std::vector<std::string> overrides) {
  overrides.push_back("runtime.max_batch=32");
  overrides.push_back("runtime.max_num_batched_tokens=64");
  return make_config(model_yaml, overrides);
}

// `extra` overrides apply to the single-rank reference and to every layout (e.g. MTP speculation).
void check_layouts(const std::string& model_yaml, const std::vector<int32_t>& sequence, int prompt_len,
                   int64_t vocab, int num_experts, const std::vector<std::string>& extra = {}) {
  const int np = world_size();
  Outcome reference;
  if (world_rank() == 0) {
    auto single = parallel::make_single_rank_communicator();
    Engine engine(model_config(model_yaml, extra), *single, make_cpu_backend(),
                  EngineOptions{.keep_logits = true});
    reference = exercise(engine, sequence, prompt_len);
  }
  auto world = parallel::make_mpi_communicator(MPI_COMM_WORLD);
  for (const Layout& layout : kLayouts) {
    if (np == 1 && layout.name != std::string("tp_sharded_moe")) continue;  // the same layout at np 1
    if (!layout.fits(np, num_experts)) continue;
    SCOPED_TRACE(std::string(layout.name) + " np " + std::to_string(np));
    std::vector<std::string> overrides = layout.overrides(np);
    overrides.insert(overrides.end(), extra.begin(), extra.end());
    Engine engine(model_config(model_yaml, overrides), *world, make_cpu_backend(),
                  EngineOptions{.keep_logits = true});
    const Outcome got = exercise(engine, sequence, prompt_len);
    if (world_rank() != 0) continue;
    ASSERT_EQ(got.logits.size(), reference.logits.size());
    double worst = 0;
    for (size_t p = 0; p < sequence.size(); ++p)
      worst = std::max(worst, relative_l2(&got.logits[p * vocab], &reference.logits[p * vocab], vocab));
    EXPECT_LT(worst, 1e-5) << layout.name;
    EXPECT_EQ(got.greedy, reference.greedy) << layout.name;
    EXPECT_EQ(got.sampled, reference.sampled) << layout.name;
    EXPECT_EQ(got.processed, reference.processed) << layout.name;
    EXPECT_NE(got.processed, got.greedy) << layout.name;
    EXPECT_EQ(got.constrained, reference.constrained) << layout.name;
    ASSERT_EQ(got.constrained.size(), 8u) << layout.name;  // the rule finished after 8 tokens
    for (int n = 0; n < 8; ++n) EXPECT_EQ((got.constrained[n] + n) % 5, 0) << layout.name << " token " << n;
    // The sampled run's prompt started on the greedy run's cached blocks (of 4), on every rank.
    EXPECT_EQ(got.prefix_hits, (prompt_len - 1) / 4 * 4) << layout.name;
    EXPECT_EQ(got.prefix_hits, reference.prefix_hits) << layout.name;
    ASSERT_EQ(got.logprobs.size(), 6u);
    ASSERT_EQ(reference.logprobs.size(), 6u);
    for (size_t i = 0; i < 6; ++i) {
      EXPECT_NEAR(got.logprobs[i].logprob, reference.logprobs[i].logprob, 1e-4)
          << layout.name << " token " << i;
      ASSERT_EQ(got.logprobs[i].top.size(), 3u);
      for (size_t j = 0; j < 3; ++j) {
        EXPECT_EQ(got.logprobs[i].top[j].first, reference.logprobs[i].top[j].first) << layout.name;
        EXPECT_NEAR(got.logprobs[i].top[j].second, reference.logprobs[i].top[j].second, 1e-4) << layout.name;
      }
    }
    std::printf("%s np %d: worst logits relative L2 %.3g, %zu greedy + %zu sampled tokens equal\n",
                layout.name, np, worst, got.greedy.size(), got.sampled.size());
  }
}

class FixtureLayouts : public ::testing::TestWithParam<std::string> {};

TEST_P(FixtureLayouts, MatchSingleRank) {
  const Reference ref = load_reference(GetParam());
  const ModelSpec spec = load_model_spec(fixture_dir(GetParam()));
  check_layouts("model: {path: " + fixture_dir(GetParam()) + "}", ref.tokens,
                static_cast<int>(ref.prompt.size()), ref.vocab, spec.num_experts);
}
INSTANTIATE_TEST_SUITE_P(Fixtures, FixtureLayouts, ::testing::ValuesIn(fixture_names()),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

TEST(SyntheticLayouts, MatchSingleRank) {
  const std::vector<int32_t> sequence = {151643, 9707, 11, 1879, 0,  3555, 374,
                                         279,    6722, 30, 220,  17, 10,   17};
  check_layouts("model: {synthetic: {preset: tiny, seed: 5}}", sequence, 6, 151936, 8);
}

// MTP speculation (k = 2) in every layout: the drafts, their verification and the MTP head's own
// collectives give the single-rank tokens, greedy and seeded.
TEST(SyntheticLayouts, MtpMatchesSingleRank) {
  const std::vector<int32_t> sequence = {1643, 3707, 11, 1879, 0, 355, 374, 279, 672, 30, 220, 17, 10, 17};
  check_layouts("model: {synthetic: {preset: tiny, seed: 5, vocab: 4096, mtp: true}}", sequence, 6, 4096, 8,
                {"speculative.method=mtp", "speculative.num_speculative_tokens=2"});
}

// Every token routed to experts 0 and 1 (rank 0's under expert parallelism): nothing may be dropped.
TEST(SkewedRouting, AllToAllDropsNothing) {
  const std::string dir = write_skewed_checkpoint();
  const Reference ref = load_reference("gqa4");
  check_layouts("model: {path: " + dir + "}", ref.tokens, static_cast<int>(ref.prompt.size()), ref.vocab, 8);
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tpserve
