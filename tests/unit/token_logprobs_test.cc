// Log-probabilities merged from the ranks' candidates against a log-softmax over the whole vocabulary.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "common/error.h"
#include "runtime/model/token_logprobs.h"

namespace tpserve {
namespace {

// Logits [rows, vocab] split into `ranks` slices; each rank keeps its C best per row and [max, sum exp].
struct Split {
  std::vector<float> values, stats;
  std::vector<int32_t> ids;
};
Split split(const std::vector<float>& logits, int rows, int vocab, int ranks, int c) {
  Split s;
  const int slice = vocab / ranks;
  for (int p = 0; p < ranks; ++p)
    for (int r = 0; r < rows; ++r) {
      const float* row = logits.data() + static_cast<size_t>(r) * vocab + p * slice;
      std::vector<int32_t> order(slice);
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return row[a] > row[b]; });
      for (int i = 0; i < c; ++i) s.values.push_back(row[order[i]]), s.ids.push_back(p * slice + order[i]);
      const float max = row[order[0]];
      double sum = 0;
      for (int i = 0; i < slice; ++i) sum += std::exp(static_cast<double>(row[i]) - max);
      s.stats.push_back(max), s.stats.push_back(static_cast<float>(sum));
    }
  return s;
}

TEST(TokenLogprobs, MatchALogSoftmaxOverTheVocabulary) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  constexpr int kRows = 3, kVocab = 96, kC = 8;
  std::vector<float> logits(kRows * kVocab);
  for (float& x : logits) x = normal(rng);
  logits[1 * kVocab + 7] = logits[1 * kVocab + 50] = 30.0f;  // a tie across ranks: the smaller id first
  for (int ranks : {1, 2, 4}) {
    SCOPED_TRACE(std::to_string(ranks) + " ranks");
    const Split s = split(logits, kRows, kVocab, ranks, kC);
    const LogprobCandidates c{s.values.data(), s.ids.data(), s.stats.data(), ranks, kRows, kC};
    std::vector<int32_t> tokens(kRows), top = {5, 2, -1};
    for (int r = 0; r < kRows; ++r) {
      const float* row = logits.data() + r * kVocab;
      tokens[r] = static_cast<int32_t>(std::max_element(row, row + kVocab) - row);
    }
    tokens[0] = static_cast<int32_t>(s.ids[3]);  // any candidate of rank 0, not the best
    const auto got = token_logprobs(c, tokens, top);
    ASSERT_EQ(got.size(), 3u);
    for (int r = 0; r < 2; ++r) {
      const float* row = logits.data() + r * kVocab;
      double sum = 0;
      for (int v = 0; v < kVocab; ++v) sum += std::exp(static_cast<double>(row[v]));
      const double lse = std::log(sum);
      EXPECT_NEAR(got[r].logprob, row[tokens[r]] - lse, 1e-4);
      std::vector<int32_t> order(kVocab);
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return row[a] > row[b]; });
      ASSERT_EQ(got[r].top.size(), static_cast<size_t>(top[r]));
      for (int i = 0; i < top[r]; ++i) {
        EXPECT_EQ(got[r].top[i].first, order[i]) << "row " << r << " place " << i;
        EXPECT_NEAR(got[r].top[i].second, row[order[i]] - lse, 1e-4);
      }
    }
    EXPECT_EQ(got[1].top[0].first, 7);
    EXPECT_TRUE(got[2].top.empty());  // asked for none
  }
}

TEST(TokenLogprobs, RefusesWhatTheCandidatesCannotAnswer) {
  const std::vector<float> values = {2, 1}, stats = {2, 1.5f};
  const std::vector<int32_t> ids = {4, 9};
  const LogprobCandidates c{values.data(), ids.data(), stats.data(), 1, 1, 2};
  EXPECT_TRUE(std::isinf(token_logprobs(c, {5}, {0})[0].logprob));  // not a candidate (NaN logits): -inf
  EXPECT_THROW(token_logprobs(c, {4}, {3}), Error);                 // more than a rank's candidates
  EXPECT_EQ(token_logprobs(c, {-1}, {1})[0].top.size(), 1u);  // a row past a rejected draft: the list only
}

}  // namespace
}  // namespace tpserve
