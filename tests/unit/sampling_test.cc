// The CPU reference sampler: greedy and ties, seeded reproducibility, the distribution it draws from
// (temperature, top-k, top-p, min-p) against the exact filtered softmax, and rank-split candidates drawing
// the same tokens as one rank.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <numeric>
#include <tuple>

#include "runtime/backend/backend.h"
#include "runtime/model/step_batch.h"

namespace tpserve {
namespace {

struct Sampler {
  std::unique_ptr<Backend> be = make_cpu_backend();

  // Draws one token per row of `logits` ([rows, vocab]) with the vocabulary split over `ranks` slices.
  std::vector<int32_t> draw(const std::vector<float>& logits, int rows, int vocab, const SamplingParams& p,
                            int64_t counter, int ranks = 1, int candidates = 64) {
    const int slice = vocab / ranks, c = std::min(candidates, slice);
    Tensor vals = be->alloc(DType::kF32, {ranks, rows, c}), ids = be->alloc(DType::kI32, {ranks, rows, c});
    Tensor stats = be->alloc(DType::kF32, {ranks, rows, 2});
    SamplingInputs in{be->alloc(DType::kF32, {rows}), be->alloc(DType::kI32, {rows}),
                      be->alloc(DType::kF32, {rows}), be->alloc(DType::kF32, {rows}),
                      be->alloc(DType::kI64, {rows}), be->alloc(DType::kI64, {rows})};
    for (int r = 0; r < rows; ++r) {
      in.temperature.ptr<float>()[r] = p.temperature, in.top_k.ptr<int32_t>()[r] = p.top_k;
      in.top_p.ptr<float>()[r] = p.top_p, in.min_p.ptr<float>()[r] = p.min_p;
      in.seed.ptr<int64_t>()[r] = p.seed, in.counter.ptr<int64_t>()[r] = counter;
    }
    for (int k = 0; k < ranks; ++k) {
      Tensor part = be->alloc(DType::kF32, {rows, slice});
      for (int r = 0; r < rows; ++r)
        std::copy_n(&logits[r * vocab + k * slice], slice, part.ptr<float>() + r * slice);
      Tensor v = vals.rows(k, k + 1).view({rows, c}), i = ids.rows(k, k + 1).view({rows, c});
      be->sampling_candidates(part, k * slice, in.temperature, v, i, stats.rows(k, k + 1).view({rows, 2}));
    }
    Tensor out = be->alloc(DType::kI32, {rows});
    if (!row_tokens.empty()) {  // one verification group over all rows
      Tensor tokens = be->alloc(DType::kI32, {rows}), start = be->alloc(DType::kI32, {2});
      std::copy(row_tokens.begin(), row_tokens.end(), tokens.ptr<int32_t>());
      start.ptr<int32_t>()[0] = 0, start.ptr<int32_t>()[1] = rows;
      Tensor accepted = be->alloc(DType::kI32, {1});
      be->verify_and_sample(vals, ids, stats, in, tokens, start, out, accepted);
      last_accepted = accepted.ptr<int32_t>()[0];
    } else {
      be->sample(vals, ids, stats, in, out);
    }
    return std::vector<int32_t>(out.ptr<int32_t>(), out.ptr<int32_t>() + rows);
  }

  std::vector<int32_t> row_tokens;
  int last_accepted = 0;
  std::pair<std::vector<int32_t>, int> verify(const std::vector<float>& logits, int rows, int vocab,
                                              const SamplingParams& p, std::vector<int32_t> tokens) {
    row_tokens = std::move(tokens);
    // Every row draws with counter 0 here (the model gives each row its own position's counter).
    auto e = draw(logits, rows, vocab, p, 0);
    row_tokens.clear();
    return {e, last_accepted};
  }
};

TEST(Sampling, GreedyTakesTheLargestAndTiesGoToTheSmallerId) {
  Sampler s;
  std::vector<float> logits = {0.5f, 2.0f, -1.0f, 2.0f, 1.0f, 0.0f, 3.0f, 3.0f};
  EXPECT_EQ(s.draw(logits, 2, 4, SamplingParams{}, 0),
            (std::vector<int32_t>{1, 2}));  // row 2: ids 2 and 3 tie
  EXPECT_EQ(s.draw(logits, 2, 4, SamplingParams{}, 0, 2), (std::vector<int32_t>{1, 2}));
}

// Greedy rows get their best candidate in every place; sampled rows their C best in order.
TEST(Sampling, GreedyRowsGetTheirBestCandidateInEveryPlace) {
  std::unique_ptr<Backend> be = make_cpu_backend();
  const int vocab = 6, c = 3;
  Tensor logits = be->alloc(DType::kF32, {2, vocab}), temp = be->alloc(DType::kF32, {2});
  const float l[] = {0.5f, 4.0f, -1.0f, 4.0f, 1.0f, 2.0f};  // ids 11 and 13 tie at the top
  for (int r = 0; r < 2; ++r)
    for (int v = 0; v < vocab; ++v) logits.ptr<float>()[r * vocab + v] = l[v];
  temp.ptr<float>()[0] = 0.0f, temp.ptr<float>()[1] = 0.8f;
  Tensor values = be->alloc(DType::kF32, {2, c}), ids = be->alloc(DType::kI32, {2, c}),
         stats = be->alloc(DType::kF32, {2, 2});
  be->sampling_candidates(logits, 10, temp, values, ids, stats);
  const std::vector<int32_t> got(ids.ptr<int32_t>(), ids.ptr<int32_t>() + 2 * c);
  EXPECT_EQ(got, (std::vector<int32_t>{11, 11, 11, 11, 13, 15}));
  for (int j = 0; j < c; ++j) EXPECT_EQ(values.ptr<float>()[j], 4.0f);
  EXPECT_EQ(values.ptr<float>()[c + 2], 2.0f);
}

std::vector<double> filtered_softmax(const std::vector<float>& l, const SamplingParams& p) {
  const int v = static_cast<int>(l.size());
  std::vector<int> order(v);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return l[a] > l[b]; });
  const double mx = l[order[0]];
  std::vector<double> prob(v);
  double z = 0;
  for (int i = 0; i < v; ++i) z += (prob[i] = std::exp((l[i] - mx) / p.temperature));
  for (auto& x : prob) x /= z;
  int keep = v;
  if (p.top_k > 0) keep = std::min(keep, p.top_k);
  if (p.min_p > 0) {
    int n = 1;
    while (n < keep && prob[order[n]] >= p.min_p * prob[order[0]]) ++n;
    keep = n;
  }
  if (p.top_p < 1) {
    double mass = 1.0;  // renormalised over what top-k / min-p left
    if (p.top_k > 0 || p.min_p > 0) {
      mass = 0;
      for (int i = 0; i < keep; ++i) mass += prob[order[i]];
    }
    double c = 0;
    int n = 0;
    while (n < keep) {
      c += prob[order[n++]] / mass;
      if (c >= p.top_p) break;
    }
    keep = n;
  }
  std::vector<double> out(v, 0.0);
  double kept = 0;
  for (int i = 0; i < keep; ++i) kept += prob[order[i]];
  for (int i = 0; i < keep; ++i) out[order[i]] = prob[order[i]] / kept;
  return out;
}

// Chi-square goodness of fit over many seeded draws (fixed seeds: the test is deterministic).
void expect_distribution(const SamplingParams& base, int ranks) {
  Sampler s;
  // Eight live tokens, padded to 64 with negligible ones so that every rank's slice holds more candidates
  // than there are live tokens (the merge keeps the C best overall).
  std::vector<float> logits = {1.0f, 0.2f, 2.0f, -0.5f, 1.5f, 0.0f, 0.7f, -2.0f};
  logits.resize(64, -40.0f);
  const int v = 64, draws = 20000;
  std::vector<int> counts(v, 0);
  for (int i = 0; i < draws; ++i) {
    SamplingParams p = base;
    p.seed = 1000 + i / 100;
    ++counts[s.draw(logits, 1, v, p, i % 100, ranks)[0]];
  }
  const auto want = filtered_softmax(logits, base);
  double chi2 = 0;
  int dof = -1;
  for (int i = 0; i < v; ++i) {
    if (want[i] < 1e-12) {
      EXPECT_EQ(counts[i], 0) << "token " << i << " is filtered out or negligible";
      continue;
    }
    const double e = want[i] * draws;
    chi2 += (counts[i] - e) * (counts[i] - e) / e;
    ++dof;
  }
  // 99.9th percentile of chi-square with <= 7 degrees of freedom is 24.3.
  EXPECT_LT(chi2, 24.3) << "dof " << dof;
}

TEST(Sampling, TemperatureDrawsFromTheSoftmax) {
  expect_distribution({.temperature = 0.7f}, 1);
}
TEST(Sampling, TopKKeepsTheKBest) {
  expect_distribution({.temperature = 1.0f, .top_k = 3}, 2);
}
TEST(Sampling, TopPKeepsTheNucleus) {
  expect_distribution({.temperature = 1.0f, .top_p = 0.8f}, 1);
}
TEST(Sampling, MinPDropsTheUnlikely) {
  expect_distribution({.temperature = 1.3f, .min_p = 0.2f}, 2);
}
TEST(Sampling, AllFiltersTogetherAcrossFourRanks) {
  expect_distribution({.temperature = 0.9f, .top_k = 5, .top_p = 0.95f, .min_p = 0.05f}, 4);
}

// Rejection sampling against a greedy draft: the first emitted token is distributed exactly as plain
// sampling from the row's filtered distribution, whichever draft was proposed (likely or unlikely).
TEST(Sampling, VerifiedTokensFollowTheTargetDistribution) {
  Sampler s;
  std::vector<float> row = {1.0f, 0.2f, 2.0f, -0.5f, 1.5f, 0.0f, 0.7f, -2.0f};
  row.resize(64, -40.0f);
  const int v = 64, draws = 20000;
  const SamplingParams base{.temperature = 0.8f, .top_k = 6};
  const auto want = filtered_softmax(row, base);
  for (int32_t draft : {2, 6, 7}) {  // the likeliest, a middling one, one top-k filters out
    std::vector<int> counts(v, 0);
    int accepted = 0;
    for (int i = 0; i < draws; ++i) {
      SamplingParams p = base;
      p.seed = 500 + i;
      // Two rows: position 0 verifies `draft`; row 1 would give the bonus token.
      std::vector<float> logits = row;
      logits.insert(logits.end(), row.begin(), row.end());
      auto [emitted, taken] = s.verify(logits, 2, v, p, {9, draft});
      ++counts[emitted[0]];
      accepted += taken;
      if (taken == 1)
        EXPECT_EQ(emitted[0], draft);
      else
        EXPECT_NE(emitted[0], draft);
    }
    double chi2 = 0;
    for (int i = 0; i < v; ++i) {
      if (want[i] < 1e-12) {
        EXPECT_EQ(counts[i], 0) << "draft " << draft << " token " << i;
        continue;
      }
      const double e = want[i] * draws;
      chi2 += (counts[i] - e) * (counts[i] - e) / e;
    }
    EXPECT_LT(chi2, 24.3) << "draft " << draft;  // 99.9th percentile, <= 7 degrees of freedom
    EXPECT_NEAR(static_cast<double>(accepted) / draws, want[draft], 0.02) << "acceptance = p(draft)";
  }
}

TEST(Sampling, GreedyVerificationAcceptsTheArgmaxChain) {
  Sampler s;
  // Three rows whose argmaxes are 3, 1, 2: drafts [3, 1] are both accepted and 2 is the bonus.
  std::vector<float> logits = {0, 1, 2, 5, 0, 9, 1, 2, 1, 2, 8, 0};
  auto [e, taken] = s.verify(logits, 3, 4, SamplingParams{}, {7, 3, 1});
  EXPECT_EQ(taken, 2);
  EXPECT_EQ(e, (std::vector<int32_t>{3, 1, 2}));
  std::tie(e, taken) = s.verify(logits, 3, 4, SamplingParams{}, {7, 3, 0});  // second draft wrong
  EXPECT_EQ(taken, 1);
  EXPECT_EQ(e, (std::vector<int32_t>{3, 1, -1}));
}

TEST(Sampling, SeededDrawsAreReproducibleAndLayoutIndependent) {
  Sampler s;
  std::vector<float> logits(4 * 256);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = std::sin(0.37f * i) * 3.0f;
  const SamplingParams p{.temperature = 1.0f, .top_k = 50, .top_p = 0.9f, .seed = 42};
  const auto a = s.draw(logits, 4, 256, p, 17), b = s.draw(logits, 4, 256, p, 17);
  EXPECT_EQ(a, b);
  EXPECT_EQ(s.draw(logits, 4, 256, p, 17, 2), a);
  EXPECT_EQ(s.draw(logits, 4, 256, p, 17, 4), a);
  int differ = 0;
  for (int seed = 0; seed < 20; ++seed) {
    SamplingParams q = p;
    q.seed = seed;
    differ += s.draw(logits, 4, 256, q, 17) != a;
  }
  EXPECT_GT(differ, 10);
}

}  // namespace
}  // namespace tpserve
