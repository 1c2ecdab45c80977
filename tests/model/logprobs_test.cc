// Log-probabilities through the engine on the CPU backend: every emitted token's, and the top n, equal a
// log-softmax of the logits the step computed (the raw distribution: no temperature, no filters), greedy,
// sampled and with MTP speculation (several tokens a step, each from its own row).
#include <gtest/gtest.h>

#include "common/error.h"
#include "model_test_util.h"
#include "runtime/engine/engine.h"
#include "tests/model/logprobs_check.h"
#include "tests/model/mtp_fixture.h"

namespace tpserve {
namespace {

using namespace testing_util;

void expect_logprobs_of_logits(const std::vector<std::string>& overrides, const SamplingParams& sampling) {
  const std::string model = "model: {synthetic: {preset: tiny, seed: 9, vocab: 4096, mtp: true}}";
  EngineRun run(make_config(model, overrides), EngineOptions{.keep_logits = true});
  EXPECT_EQ(check_logprobs_against_logits(*run.engine, sampling, 1e-4), 12);
}

TEST(Logprobs, AreALogSoftmaxOfTheStepsLogitsGreedy) {
  expect_logprobs_of_logits({}, SamplingParams{});
}

TEST(Logprobs, AreOfTheRawDistributionWhenSampling) {
  expect_logprobs_of_logits({}, SamplingParams{.temperature = 0.7f, .top_k = 40, .top_p = 0.9f, .seed = 5});
}

TEST(Logprobs, AreOfEachVerifiedRowUnderMtp) {
  expect_logprobs_of_logits({"speculative.method=mtp", "speculative.num_speculative_tokens=2"},
                            SamplingParams{});
}

// Without keep_logits the MTP draft steps reuse the step's logits buffer: the log-probabilities must be
// taken before them (a run with MTP gives the plain run's greedy tokens and their log-probabilities).
TEST(Logprobs, UnderMtpWithoutKeptLogitsAreThePlainRunsOnes) {
  const std::string model = "model: {synthetic: {preset: tiny, seed: 9, vocab: 4096, mtp: true}}";
  EngineRun plain(make_config(model));
  EngineRun mtp(make_config(model, {"speculative.method=mtp", "speculative.num_speculative_tokens=2"}));
  expect_same_logprobs(greedy_with_logprobs(*mtp.engine), greedy_with_logprobs(*plain.engine), 1e-4);
  EXPECT_GT(mtp.engine->scheduler().speculative_metrics().drafts, 0);
}

TEST(Logprobs, MoreThanTheLimitIsRefused) {
  const std::string model = "model: {synthetic: {preset: tiny, seed: 9, vocab: 4096}}";
  EngineRun run(make_config(model, {"runtime.sampling_candidates=8"}));
  EXPECT_EQ(run.engine->scheduler().limits().max_logprobs, 8);
  EXPECT_THROW(run.engine->scheduler().add(Request{.id = 1, .prompt = {1}, .max_tokens = 1, .logprobs = 9}),
               Error);
}

}  // namespace
}  // namespace tpserve
