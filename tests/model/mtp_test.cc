// Speculative decoding on the CPU backend. With scripted drafts (any model): correct drafts are all
// accepted, a corrupted draft stops acceptance exactly there, and the KV cache after the rejections equals
// the cache of a run that never saw them. With the MTP head (a synthetic model, and a transformers fixture
// given an MTP head): greedy decoding with k = 1, 2, 3 gives exactly the tokens of greedy decoding without
// it, seeded sampling with MTP is reproducible, and it draws from plain sampling's distribution.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>

#include "model_test_util.h"
#include "parallel/communicator.h"
#include "runtime/engine/engine.h"
#include "tests/model/mtp_fixture.h"

namespace tpserve {
namespace {

using namespace testing_util;

// All of the first `positions` KV entries of every layer (single sequence: slot == position).
std::vector<float> kv_prefix(Engine& e, int positions) {
  std::vector<float> out;
  for (int l = 0; l < e.spec().num_layers; ++l) {
    const std::vector<float> layer = kv_positions(e.model().kv_cache(l), positions);
    out.insert(out.end(), layer.begin(), layer.end());
  }
  return out;
}

class ScriptedDrafts : public ::testing::TestWithParam<std::string> {};

TEST_P(ScriptedDrafts, AcceptUpToTheFirstCorruptionAndRollBackTheCache) {
  const Reference ref = load_reference(GetParam());
  const Config config = fixture_config(GetParam());
  const int n = 40;
  EngineRun plain(config);
  const std::vector<int32_t> greedy = plain.engine->generate(ref.prompt, SamplingParams{}, n, true);
  std::vector<int32_t> truth = ref.prompt;
  truth.insert(truth.end(), greedy.begin(), greedy.end());
  const int cached = static_cast<int>(truth.size()) - 1;
  const std::vector<float> plain_kv = kv_prefix(*plain.engine, cached);

  for (int k : {1, 2, 3}) {
    for (int corrupt = -1; corrupt < k; ++corrupt) {  // -1: every draft right
      SCOPED_TRACE("k " + std::to_string(k) + " corrupt " + std::to_string(corrupt));
      EngineOptions o;
      o.draft_script_tokens = k;
      o.draft_script = [&](int64_t, const std::vector<int32_t>& tokens, int kk) {
        std::vector<int32_t> d;
        for (int j = 0; j < kk; ++j) {
          const size_t at = tokens.size() + j;
          int32_t t = at < truth.size() ? truth[at] : 0;
          if (j == corrupt) t = (t + 1) % static_cast<int32_t>(ref.vocab);
          d.push_back(t);
        }
        return d;
      };
      EngineRun spec(config, o);
      EXPECT_EQ(spec.engine->generate(ref.prompt, SamplingParams{}, n, true), greedy);
      const auto& m = spec.engine->scheduler().speculative_metrics();
      ASSERT_GT(m.drafts, 0);
      for (int j = 0; j < k; ++j) {
        if (corrupt < 0 || j < corrupt) {
          // Every verification but possibly the last (drafts past the requested length) accepts position j.
          EXPECT_GE(m.accepted_at[j], m.drafts - 1) << "position " << j;
        } else {
          EXPECT_EQ(m.accepted_at[j], 0) << "position " << j;
        }
      }
      EXPECT_EQ(kv_prefix(*spec.engine, cached), plain_kv);
    }
  }
}
INSTANTIATE_TEST_SUITE_P(Fixtures, ScriptedDrafts, ::testing::ValuesIn(fixture_names()),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

std::vector<std::string> mtp_overrides(int k) {
  return {"speculative.method=mtp", "speculative.num_speculative_tokens=" + std::to_string(k)};
}

TEST(MtpHead, GreedyEqualsPlainGreedyOnASyntheticModel) {
  const std::string model = "model: {synthetic: {preset: tiny, seed: 9, vocab: 4096, mtp: true}}";
  const std::vector<int32_t> prompt = {3707, 11, 1879, 0, 3555};
  const auto plain = EngineRun(make_config(model)).engine->generate(prompt, SamplingParams{}, 64, true);
  for (int k : {1, 2, 3}) {
    EngineRun spec(make_config(model, mtp_overrides(k)));
    EXPECT_EQ(spec.engine->generate(prompt, SamplingParams{}, 64, true), plain) << "k " << k;
    EXPECT_GT(spec.engine->scheduler().speculative_metrics().drafts, 0);
  }
}

// KV blocks smaller than a step's rows (1 + k) and than the drafts' reach: the padding sequences of graph
// buckets (run at capture even on the CPU) and of the warm-up step without graphs (k = 2 here) must keep
// their KV writes inside the padding block.
TEST(MtpHead, GreedyEqualsPlainGreedyWithKvBlocksSmallerThanTheDrafts) {
  const std::string model = "model: {synthetic: {preset: tiny, seed: 9, vocab: 4096, mtp: true}}";
  const std::vector<int32_t> prompt = {3707, 11, 1879, 0, 3555};
  for (int block : {1, 2}) {
    const std::string bs = "runtime.kv_block_size=" + std::to_string(block);
    const auto plain =
        EngineRun(make_config(model, {bs})).engine->generate(prompt, SamplingParams{}, 32, true);
    for (int k : {1, 2, 3}) {
      std::vector<std::string> overrides = mtp_overrides(k);
      overrides.push_back(bs);
      if (k == 2) overrides.push_back("cuda_graph.enabled=false");
      EngineRun spec(make_config(model, overrides));
      EXPECT_EQ(spec.engine->generate(prompt, SamplingParams{}, 32, true), plain)
          << "block " << block << " k " << k;
    }
  }
}

TEST(MtpHead, GreedyEqualsPlainGreedyOnAFixtureWithAnMtpHead) {
  for (const std::string& fixture : fixture_names()) {
    const std::string dir = fixture_with_mtp(fixture);
    const Reference ref = load_reference(fixture);
    const std::string model = "model: {path: " + dir + "}";
    const auto plain = EngineRun(make_config(model)).engine->generate(ref.prompt, SamplingParams{}, 64, true);
    for (int k : {1, 2, 3}) {
      EngineRun spec(make_config(model, mtp_overrides(k)));
      EXPECT_EQ(spec.engine->generate(ref.prompt, SamplingParams{}, 64, true), plain)
          << fixture << " k " << k;
    }
    std::filesystem::remove_all(dir);
  }
}

TEST(MtpHead, SeededSamplingIsReproducible) {
  const std::string model = "model: {synthetic: {preset: tiny, seed: 9, vocab: 4096, mtp: true}}";
  const SamplingParams p{.temperature = 0.9f, .top_k = 40, .top_p = 0.95f, .seed = 1234};
  EngineRun a(make_config(model, mtp_overrides(2))), b(make_config(model, mtp_overrides(2)));
  const auto ta = a.engine->generate({1, 2, 3}, p, 32, true);
  EXPECT_EQ(ta.size(), 32u);
  EXPECT_EQ(b.engine->generate({1, 2, 3}, p, 32, true), ta);
}

// A draft is accepted iff the row's own draw is it, so speculation changes which steps emit a token, never
// which token: seeded sampling with MTP (any k) gives exactly plain seeded sampling's tokens (on the CPU
// backend, where a verify row's logits are a plain row's).
TEST(MtpHead, SeededSamplingGivesPlainSamplingsTokens) {
  // A 32-token vocabulary, so that drafts are often likely (and often accepted) under sampling.
  const std::string model = "model: {synthetic: {preset: tiny, seed: 9, vocab: 32, mtp: true}}";
  std::vector<SamplingParams> params;
  for (int64_t seed = 1; seed <= 8; ++seed) {
    params.push_back({.temperature = 1.0f, .seed = seed});
    params.push_back({.temperature = 0.8f, .top_k = 10, .top_p = 0.9f, .seed = 100 + seed});
    params.push_back({.temperature = 1.3f, .min_p = 0.05f, .seed = 200 + seed});
  }
  EngineRun plain(make_config(model));
  for (int k : {1, 2, 3}) {
    EngineRun spec(make_config(model, mtp_overrides(k)));
    for (const SamplingParams& p : params) {
      const auto want = plain.engine->generate({1, 2, 3}, p, 40, true);
      EXPECT_EQ(spec.engine->generate({1, 2, 3}, p, 40, true), want) << "k " << k << " seed " << p.seed;
    }
    EXPECT_GT(spec.engine->scheduler().speculative_metrics().drafts, 0);
  }
}

// ... and so do requests run together in a KV cache too small for them, whose preemptions drop drafts.
TEST(MtpHead, SeededSamplingUnderPreemptionGivesPlainSamplingsTokens) {
  const std::string model = "model: {synthetic: {preset: tiny, seed: 9, vocab: 32, mtp: true}}";
  auto requests = [] {
    std::vector<Request> r(4);
    for (int i = 0; i < 4; ++i) {
      r[i].prompt = {1, 2, 3 + i};
      r[i].sampling = SamplingParams{.temperature = 1.0f, .seed = 40 + i};
      r[i].max_tokens = 24;
      r[i].ignore_eos = true;
    }
    return r;
  };
  const auto plain =
      EngineRun(make_config(model, {"runtime.max_seq_len=64"})).engine->generate_together(requests());
  std::vector<std::string> overrides = mtp_overrides(2);
  overrides.push_back("runtime.max_seq_len=64");
  overrides.push_back("runtime.num_kv_blocks=20");  // 80 tokens for 4 x (3 + 24 + 4)
  EngineRun spec(make_config(model, overrides));
  EXPECT_EQ(spec.engine->generate_together(requests()), plain);
  EXPECT_GT(spec.engine->scheduler().preemptions(), 0);
}

// Histogram over the vocabulary of the tokens at positions 1 and 2 of n seeded samples (3 tokens each, all
// requests in flight together).
std::vector<int64_t> sampled_histogram(Engine& e, int n, int vocab, int64_t seed_base) {
  std::vector<Request> requests(n);
  for (int i = 0; i < n; ++i) {
    requests[i].prompt = {1, 2, 3};
    requests[i].sampling = SamplingParams{.temperature = 1.0f, .seed = static_cast<int64_t>(seed_base) + i};
    requests[i].max_tokens = 3;
    requests[i].ignore_eos = true;
  }
  std::vector<int64_t> h(vocab);
  for (const auto& tokens : e.generate_together(std::move(requests))) {
    EXPECT_EQ(tokens.size(), 3u);
    for (size_t j = 1; j < tokens.size(); ++j) ++h.at(tokens[j]);
  }
  return h;
}

// Two-sample chi-square statistic over the bins with at least 10 counts together (the rest pooled), and
// its degrees of freedom.
std::pair<double, int> chi_square(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  double na = 0, nb = 0;
  for (size_t i = 0; i < a.size(); ++i) na += a[i], nb += b[i];
  double stat = 0, pooled_a = 0, pooled_b = 0;
  int bins = 0;
  auto add = [&](double x, double y) {
    stat += std::pow(x * std::sqrt(nb / na) - y * std::sqrt(na / nb), 2) / (x + y);
    ++bins;
  };
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] + b[i] >= 10) {
      add(static_cast<double>(a[i]), static_cast<double>(b[i]));
    } else {
      pooled_a += static_cast<double>(a[i]);
      pooled_b += static_cast<double>(b[i]);
    }
  }
  if (pooled_a + pooled_b > 0) add(pooled_a, pooled_b);
  return {stat, bins - 1};
}

// Sampling with MTP drafts (verification by rejection sampling) draws from the same distribution as plain
// sampling: a two-sample chi-square test on a 32-token vocabulary, 3000 requests each, fixed seeds (so the
// outcome is deterministic), failing below p = 0.001. Accepting drafts wrongly (e.g. always) would put most
// mass on the drafts' argmax and fail it by far.
TEST(MtpHead, SampledTokensFollowPlainSamplingsDistribution) {
  const int vocab = 32, n = 3000;
  const std::string model = "model: {synthetic: {preset: tiny, seed: 4, vocab: 32, mtp: true}}";
  const std::vector<std::string> batch = {"runtime.max_batch=64", "runtime.max_num_batched_tokens=256"};
  std::vector<std::string> spec = mtp_overrides(1);
  spec.insert(spec.end(), batch.begin(), batch.end());
  EngineRun plain(make_config(model, batch)), mtp(make_config(model, spec));
  const std::vector<int64_t> hp = sampled_histogram(*plain.engine, n, vocab, 1000);
  const std::vector<int64_t> hm = sampled_histogram(*mtp.engine, n, vocab, 500000);
  EXPECT_GT(mtp.engine->scheduler().speculative_metrics().accepted_tokens, 0) << "no draft was ever accepted";
  const auto [stat, df] = chi_square(hp, hm);
  ASSERT_GE(df, 3) << "too few populated bins for a meaningful test";
  // Wilson-Hilferty: chi2(df) quantile at p = 0.001 (z = 3.09).
  const double c = 2.0 / (9.0 * df), critical = df * std::pow(1 - c + 3.09 * std::sqrt(c), 3);
  EXPECT_LT(stat, critical) << "chi-square " << stat << " with " << df << " degrees of freedom";
  std::printf("MTP vs plain sampling: chi-square %.1f, df %d, critical (p = 0.001) %.1f\n", stat, df,
              critical);
}

// The logits a step returns (tests) are the main model's for its sampled rows, though the MTP head's draft
// steps run after them in the same step: a prompt's equal those without MTP.
TEST(MtpHead, StepLogitsAreTheMainModels) {
  const std::string model = "model: {synthetic: {preset: tiny, seed: 9, vocab: 4096, mtp: true}}";
  EngineRun plain(make_config(model), EngineOptions{.keep_logits = true});
  EngineRun mtp(make_config(model, mtp_overrides(2)), EngineOptions{.keep_logits = true});
  std::vector<std::vector<float>> logits[2];
  for (int i = 0; i < 2; ++i) {
    Engine& e = *(i == 0 ? plain : mtp).engine;
    e.scheduler().add(
        Request{.id = 1, .prompt = {3707, 11, 1879, 0, 3555}, .max_tokens = 2, .ignore_eos = true});
    while (e.scheduler().has_work()) e.step(&logits[i].emplace_back());
  }
  ASSERT_EQ(logits[0].size(), 2u);
  ASSERT_GE(logits[1].size(), 1u);
  ASSERT_EQ(logits[1][0].size(), 4096u);
  for (size_t v = 0; v < 4096; ++v)
    ASSERT_NEAR(logits[1][0][v], logits[0][0][v], 1e-5f + 1e-5f * std::abs(logits[0][0][v])) << v;
}

TEST(MtpHead, MissingHeadIsAClearError) {
  try {
    EngineRun r(fixture_config("gqa4", mtp_overrides(1)));
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("mtp"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tpserve
