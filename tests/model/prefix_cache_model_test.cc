// Prefix caching on the CPU backend: requests whose prompts share prefixes with earlier requests (and with
// their answers) get the greedy tokens of an engine that computes every token, with and without the MTP
// head; with it, the drafts accepted are the same too (the draft layer's KV of a reused block is the KV it
// would have computed: blocks are matched with the token after them).
#include <gtest/gtest.h>

#include "model_test_util.h"
#include "parallel/communicator.h"
#include "runtime/engine/engine.h"
#include "tests/model/mtp_fixture.h"
#include "tests/model/prefix_cache_probe.h"

namespace tpserve {
namespace {

using namespace testing_util;

struct Waves {
  std::vector<std::vector<int32_t>> tokens;
  PrefixCacheMetrics prefix;
  int64_t accepted_drafts = 0;
};

// Two waves on one engine: three requests of a 21-token system prompt with short tails; then two of the
// prompts again, one extended by its first answer, a new tail, and one that leaves the system prompt at 20.
Waves serve(const std::vector<std::string>& overrides) {
  const std::string model = "model: {synthetic: {preset: tiny, seed: 9, vocab: 4096, mtp: true}}";
  EngineRun run(make_config(model, overrides));
  std::vector<int32_t> system;
  for (int i = 0; i < 21; ++i) system.push_back(static_cast<int32_t>((i * 389 + 17) % 4096));
  auto prompt = [&](std::vector<int32_t> tail) {
    std::vector<int32_t> p = system;
    p.insert(p.end(), tail.begin(), tail.end());
    return p;
  };
  auto request = [](std::vector<int32_t> p) {
    return Request{.prompt = std::move(p), .max_tokens = 12, .ignore_eos = true};
  };
  Waves w;
  const std::vector<std::vector<int32_t>> first = {prompt({5, 6}), prompt({7}), prompt({900, 901, 902, 903})};
  std::vector<Request> wave;
  for (const auto& p : first) wave.push_back(request(p));
  w.tokens = run.engine->generate_together(std::move(wave));
  std::vector<int32_t> extended = first[0];
  extended.insert(extended.end(), w.tokens[0].begin(), w.tokens[0].end());
  // Diverging right after the system prompt's fifth block: the draft layer's KV at position 19 was computed
  // with system[20], not with this prompt's token there.
  std::vector<int32_t> diverging(system.begin(), system.begin() + 20);
  diverging.insert(diverging.end(), {1234, 99, 98});
  for (const auto& p : {first[1], extended, prompt({8, 9, 10}), diverging}) wave.push_back(request(p));
  const auto second = run.engine->generate_together(std::move(wave));
  w.tokens.insert(w.tokens.end(), second.begin(), second.end());
  w.prefix = run.engine->scheduler().prefix_cache_metrics();
  w.accepted_drafts = run.engine->scheduler().speculative_metrics().accepted_tokens;
  return w;
}

TEST(PrefixCacheModel, CachedPrefixesGiveTheTokensOfComputingEverything) {
  for (const std::vector<std::string>& spec :
       {std::vector<std::string>{},
        std::vector<std::string>{"speculative.method=mtp", "speculative.num_speculative_tokens=2"}}) {
    SCOPED_TRACE(spec.empty() ? "no speculation" : "MTP, k = 2");
    auto off = spec, on = spec;
    off.push_back("runtime.enable_prefix_caching=false");
    on.push_back("runtime.enable_prefix_caching=true");
    const Waves plain = serve(off), cached = serve(on);
    ASSERT_EQ(plain.tokens.size(), 7u);
    EXPECT_EQ(cached.tokens, plain.tokens);
    EXPECT_EQ(plain.prefix.hit_tokens, 0);
    // First wave: the second and third prompts wait a step for the first's system prompt blocks (5 of 4
    // tokens; with MTP too: each has system[20] after them). Second wave: 20 of 22 tokens, 32 of 35 (8
    // blocks), 20 of 24, 20 of 23 (with MTP 16: the fifth block was followed by system[20], not 1234).
    EXPECT_EQ(cached.prefix.hit_tokens, 20 + 20 + (spec.empty() ? 20 + 32 + 20 + 20 : 20 + 32 + 20 + 16));
    // Each prompt is one chunk and nothing is preempted, so verifications fall alike with and without the
    // cache: the same drafts are accepted when the draft layer reads the KV it would have computed.
    EXPECT_EQ(cached.accepted_drafts, plain.accepted_drafts);
  }
}

// A prompt whose first 32 tokens another request computed (blocks of 4) draws its first token from the
// logits it has when computed in full (the CPU backend computes each row alike whatever the batch: equal to
// float rounding).
TEST(PrefixCacheModel, ACachedPrefixGivesTheLogitsOfAFullPrefill) {
  const std::string model = "model: {synthetic: {preset: tiny, seed: 9, vocab: 4096, mtp: true}}";
  std::vector<int32_t> shared, prompt;
  for (int i = 0; i < 37; ++i) shared.push_back(static_cast<int32_t>((i * 977 + 5) % 4096));
  prompt.assign(shared.begin(), shared.begin() + 32);
  prompt.insert(prompt.end(), {17, 18, 19, 20, 21, 22});
  for (const std::vector<std::string>& spec :
       {std::vector<std::string>{},
        std::vector<std::string>{"speculative.method=mtp", "speculative.num_speculative_tokens=2"}}) {
    auto on = spec, off = spec;
    on.push_back("runtime.enable_prefix_caching=true");
    off.push_back("runtime.enable_prefix_caching=false");
    EngineRun cached(make_config(model, on), EngineOptions{.keep_logits = true});
    EngineRun full(make_config(model, off), EngineOptions{.keep_logits = true});
    const FirstTokenLogits got = first_token_logits(*cached.engine, {shared}, prompt);
    const FirstTokenLogits want = first_token_logits(*full.engine, {shared}, prompt);
    EXPECT_EQ(got.cached_tokens, spec.empty() ? 32 : 28);  // MTP: the eighth block went on with shared[32]
    EXPECT_EQ(want.cached_tokens, 0);
    ASSERT_EQ(got.logits.size(), 4096u);
    ASSERT_EQ(want.logits.size(), 4096u);
    for (size_t i = 0; i < want.logits.size(); ++i)
      ASSERT_NEAR(got.logits[i], want.logits[i], 1e-5f + 1e-5f * std::abs(want.logits[i])) << i;
  }
}

}  // namespace
}  // namespace tpserve
