// Logit bias, penalties and min_tokens through the engine on the CPU backend: every step's logits equal the
// raw logits of the same prefix (a plain engine's) processed by an independent reference of vLLM's rules,
// greedy and sampled, with and without MTP speculation (penalised requests are not speculated; biased ones
// are, each verified row with its own min_tokens mask).
#include <gtest/gtest.h>

#include "model_test_util.h"
#include "runtime/engine/engine.h"
#include "tests/model/logit_processing_check.h"
#include "tests/model/mtp_fixture.h"
#include "tests/unit/modulo_constraint.h"

namespace tpserve {
namespace {

using namespace testing_util;

const std::string kModel = "model: {synthetic: {preset: tiny, seed: 9, vocab: 4096, mtp: true}}";
const std::vector<std::string> kMtp = {"speculative.method=mtp", "speculative.num_speculative_tokens=2"};

ProcessedRun run_and_check(const std::vector<std::string>& overrides, const Request& r,
                           EngineOptions options = {}, TokenConstraint* mirror = nullptr) {
  options.keep_logits = true;
  EngineRun run(make_config(kModel, overrides), std::move(options));
  EngineRun plain(make_config(kModel), EngineOptions{.keep_logits = true});
  return check_processed_run(*run.engine, *plain.engine, r, 1e-4, 1e-4, mirror);
}

std::vector<int32_t> plain_greedy(const std::vector<int32_t>& prompt, int n) {
  EngineRun plain(make_config(kModel));
  return plain.engine->generate(prompt, SamplingParams{}, n, true);
}

Request penalised(const SamplingParams& sampling) {
  return Request{
      .id = 1,
      .prompt = {11, 12, 13, 11, 14},
      .sampling = sampling,
      .max_tokens = 16,
      .ignore_eos = true,
      // A repetition penalty below 1 favours the prompt's tokens: the random model's greedy run never
      // repeats one, so this changes its tokens, and the other two then push it off each.
      .processing = {.repetition_penalty = 0.25f, .frequency_penalty = 0.4f, .presence_penalty = 0.6f}};
}

TEST(LogitProcessing, PenaltiesGreedyMatchTheReferenceAndChangeTheTokens) {
  const ProcessedRun got = run_and_check({}, penalised({}));
  EXPECT_EQ(got.tokens.size(), 16u);
  EXPECT_NE(got.tokens, plain_greedy({11, 12, 13, 11, 14}, 16));
}

TEST(LogitProcessing, PenaltiesSampledMatchTheReference) {
  const ProcessedRun got = run_and_check({}, penalised({.temperature = 0.8f, .top_k = 50, .seed = 3}));
  EXPECT_EQ(got.tokens.size(), 16u);
}

TEST(LogitProcessing, PenalisedRequestsAreNotSpeculatedAndGetThePlainTokens) {
  const ProcessedRun plain = run_and_check({}, penalised({}));
  const ProcessedRun mtp = run_and_check(kMtp, penalised({}));
  EXPECT_EQ(mtp.tokens, plain.tokens);
  EXPECT_EQ(mtp.drafts, 0);
}

Request biased_with_min_tokens() {
  const std::vector<int32_t> prompt = {21, 22, 23};
  const std::vector<int32_t> greedy = plain_greedy(prompt, 4);
  Request r{.id = 1, .prompt = prompt, .max_tokens = 12, .ignore_eos = true};
  r.stop_token_ids = {greedy[2]};
  r.processing.min_tokens = 6;
  r.processing.logit_bias = {{greedy[0], -100.0f}, {77, 2.5f}, {4000, 1.0f}};
  return r;
}

TEST(LogitProcessing, BiasAndMinTokensUnderMtpMatchTheReference) {
  const Request r = biased_with_min_tokens();
  const ProcessedRun got = run_and_check(kMtp, r);
  EXPECT_GT(got.drafts, 0);  // biased requests are speculated
  ASSERT_GE(got.tokens.size(), 6u);
  EXPECT_NE(got.tokens[0], r.processing.logit_bias[0].first);
  for (int i = 0; i < 6; ++i) EXPECT_NE(got.tokens[i], r.stop_token_ids[0]) << i;  // masked before min_tokens
}

// Drafts that are always right (the plain run's tokens): every verified row emits, so each row's own
// min_tokens mask and bias are checked, not only the first row's.
TEST(LogitProcessing, EveryVerifiedRowHasItsOwnMinTokensMask) {
  const Request r = biased_with_min_tokens();
  const ProcessedRun plain = run_and_check({}, r);
  EngineOptions options;
  options.draft_script_tokens = 2;
  options.draft_script = [&](int64_t, const std::vector<int32_t>& tokens, int k) {
    std::vector<int32_t> drafts;
    for (size_t i = tokens.size() - r.prompt.size(); drafts.size() < static_cast<size_t>(k); ++i)
      drafts.push_back(i < plain.tokens.size() ? plain.tokens[i] : 0);
    return drafts;
  };
  const ProcessedRun scripted = run_and_check({}, r, options);
  EXPECT_EQ(scripted.tokens, plain.tokens);
  EXPECT_GE(scripted.accepted, 6);
}

// Structured output: a rule over ids (after n tokens, t with (t + n) % 7 == 0; finished after 6), with a
// bias on one of its tokens: every step's logits are the processed raw ones with the refused tokens at -inf,
// the request stops when the rule is finished, and it is not speculated.
Request constrained(const SamplingParams& sampling) {
  Request r{.id = 1, .prompt = {31, 32, 33}, .sampling = sampling, .max_tokens = 16, .ignore_eos = true};
  r.constraint = std::make_shared<ModuloConstraint>(7, 6);
  r.processing.logit_bias = {{700, 3.0f}, {701, 50.0f}};
  return r;
}

TEST(StructuredOutput, MaskedLogitsGreedySampledAndUnderMtp) {
  for (const bool mtp : {false, true})
    for (const SamplingParams& sampling :
         {SamplingParams{}, SamplingParams{.temperature = 0.9f, .seed = 5}}) {
      SCOPED_TRACE(std::string(mtp ? "mtp" : "plain") + (sampling.temperature > 0 ? " sampled" : " greedy"));
      ModuloConstraint mirror(7, 6);
      const ProcessedRun got =
          run_and_check(mtp ? kMtp : std::vector<std::string>{}, constrained(sampling), {}, &mirror);
      ASSERT_EQ(got.tokens.size(), 6u);  // stopped when the rule was finished, not at max_tokens
      for (int n = 0; n < 6; ++n) EXPECT_EQ((got.tokens[n] + n) % 7, 0) << n;
      EXPECT_EQ(got.drafts, 0);
      if (sampling.temperature == 0) {
        EXPECT_NE(got.tokens, plain_greedy({31, 32, 33}, 6));
      }
    }
}

}  // namespace
}  // namespace tpserve
