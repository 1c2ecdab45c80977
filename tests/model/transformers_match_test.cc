// The CPU backend against Hugging Face transformers (float32) on the committed fixtures: logits at every
// position within 1e-4 relative L2, the same 16 greedy tokens, prefill-then-decode (across KV block
// boundaries) equal to one long prefill, and chunked prefill equal to whole prefill.
#include <gtest/gtest.h>

#include "model_test_util.h"
#include "parallel/communicator.h"
#include "runtime/engine/engine.h"

namespace tpserve {
namespace {

using namespace testing_util;

class TransformersMatch : public ::testing::TestWithParam<std::string> {
 protected:
  std::unique_ptr<Engine> make_engine(const std::vector<std::string>& overrides = {}) {
    comm_ = parallel::make_single_rank_communicator();
    return std::make_unique<Engine>(fixture_config(GetParam(), overrides), *comm_, make_cpu_backend(),
                                    EngineOptions{.keep_logits = true});
  }
  std::unique_ptr<parallel::Communicator> comm_;
};

TEST_P(TransformersMatch, LogitsAtEveryPositionInOnePrefill) {
  const Reference ref = load_reference(GetParam());
  auto engine =
      make_engine({"runtime.max_batch=32", "runtime.max_num_batched_tokens=64"});  // 23 sampled rows
  const int n = static_cast<int>(ref.tokens.size());
  ASSERT_EQ(engine->spec().vocab_size, ref.vocab);
  const StepResult r = engine->run_batch(sequence_step(ref.tokens, 0, n, 4, true), true);
  ASSERT_EQ(r.logits.size(), ref.logits.size());
  double worst = 0;
  for (int p = 0; p < n; ++p) {
    const double err = relative_l2(&r.logits[p * ref.vocab], &ref.logits[p * ref.vocab], ref.vocab);
    EXPECT_LT(err, 1e-4) << GetParam() << " position " << p;
    worst = std::max(worst, err);
  }
  RecordProperty("worst_relative_l2", std::to_string(worst));
  std::printf("%s: worst relative L2 over %d positions: %.3g\n", GetParam().c_str(), n, worst);
}

TEST_P(TransformersMatch, SixteenGreedyTokens) {
  const Reference ref = load_reference(GetParam());
  auto engine = make_engine();
  const std::vector<int32_t> expected(ref.tokens.begin() + ref.prompt.size(), ref.tokens.end());
  EXPECT_EQ(engine->generate(ref.prompt, SamplingParams{}, static_cast<int>(expected.size()), true),
            expected);
}

TEST_P(TransformersMatch, PrefillThenDecodeAcrossBlocksEqualsOneLongPrefill) {
  const Reference ref = load_reference(GetParam());
  auto engine = make_engine();  // kv_block_size 4: decode crosses several block boundaries
  const int prompt = static_cast<int>(ref.prompt.size()), n = static_cast<int>(ref.tokens.size());
  StepResult first = engine->run_batch(sequence_step(ref.tokens, 0, prompt, 4, false), true);
  EXPECT_LT(relative_l2(first.logits.data(), &ref.logits[(prompt - 1) * ref.vocab], ref.vocab), 1e-4);
  for (int p = prompt; p < n; ++p) {
    const StepResult r = engine->run_batch(sequence_step(ref.tokens, p, 1, 4, false), true);
    EXPECT_LT(relative_l2(r.logits.data(), &ref.logits[p * ref.vocab], ref.vocab), 1e-4)
        << "decode position " << p;
    if (p + 1 < n) {
      EXPECT_EQ(r.tokens[0], ref.tokens[p + 1]) << "position " << p;
    }
  }
}

TEST_P(TransformersMatch, ChunkedPrefillGivesTheSameTokens) {
  const Reference ref = load_reference(GetParam());
  auto engine = make_engine({"runtime.max_num_batched_tokens=4"});  // prompt of 7 in chunks of 4 + 3
  const std::vector<int32_t> expected(ref.tokens.begin() + ref.prompt.size(), ref.tokens.end());
  EXPECT_EQ(engine->generate(ref.prompt, SamplingParams{}, static_cast<int>(expected.size()), true),
            expected);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, TransformersMatch, ::testing::ValuesIn(fixture_names()),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

}  // namespace
}  // namespace tpserve
