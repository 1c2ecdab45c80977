// For log-probability tests on any backend: runs a request that asks for the top 4 beside one that asks
// none, each step with its logits (EngineOptions::keep_logits), and checks every returned log-probability
// against a log-softmax of the row's logits: the drawn token's and the top 4 (ids where their logits differ
// by more than the tolerance; ties may order either way). Returns the tokens checked.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "runtime/engine/engine.h"

namespace tpserve::testing_util {

inline int check_logprobs_against_logits(Engine& e, const SamplingParams& sampling, double tolerance) {
  const int vocab = e.spec().vocab_size;
  e.scheduler().add(Request{.id = 1,
                            .prompt = {3707, 11, 1879, 0, 3555},
                            .sampling = sampling,
                            .max_tokens = 12,
                            .ignore_eos = true,
                            .logprobs = 4});
  e.scheduler().add(Request{.id = 2, .prompt = {5, 6, 7}, .max_tokens = 12, .ignore_eos = true});
  int checked = 0;
  while (e.scheduler().has_work()) {
    std::vector<float> logits;
    const auto events = e.step(&logits);
    int row = 0;  // request 1 was admitted first: its rows come first in every step
    for (const TokenEvent& ev : events) {
      if (ev.request_id == 2) {
        EXPECT_FALSE(ev.logprobs.has_value());
        continue;
      }
      if (!ev.logprobs) {
        ADD_FAILURE() << "token " << ev.index << " has no log-probabilities";
        continue;
      }
      const float* l = logits.data() + static_cast<size_t>(row++) * vocab;
      double sum = 0;
      for (int v = 0; v < vocab; ++v) sum += std::exp(static_cast<double>(l[v]));
      const double lse = std::log(sum);
      EXPECT_NEAR(ev.logprobs->logprob, l[ev.token] - lse, tolerance) << "token " << ev.index;
      std::vector<int32_t> order(vocab);
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return l[a] > l[b]; });
      EXPECT_EQ(ev.logprobs->top.size(), 4u);
      for (size_t i = 0; i < std::min<size_t>(4, ev.logprobs->top.size()); ++i) {
        const auto [id, logprob] = ev.logprobs->top[i];
        EXPECT_NEAR(logprob, l[order[i]] - lse, tolerance) << "token " << ev.index << " place " << i;
        if (std::abs(l[id] - l[order[i]]) > tolerance) {
          EXPECT_EQ(id, order[i]) << "token " << ev.index;
        }
      }
      if (sampling.temperature == 0) {
        EXPECT_NEAR(l[ev.token], l[order[0]], tolerance);  // greedy draws the best
      }
      ++checked;
    }
  }
  return checked;
}

// A greedy request's tokens with their log-probabilities (top 4), run alone to completion; for comparing
// engines that must agree (without EngineOptions::keep_logits: the production buffers).
inline std::vector<TokenEvent> greedy_with_logprobs(Engine& e) {
  e.scheduler().add(Request{
      .id = 7, .prompt = {3707, 11, 1879, 0, 3555}, .max_tokens = 12, .ignore_eos = true, .logprobs = 4});
  std::vector<TokenEvent> out;
  while (e.scheduler().has_work())
    for (TokenEvent& ev : e.step()) out.push_back(std::move(ev));
  return out;
}

inline void expect_same_logprobs(const std::vector<TokenEvent>& got, const std::vector<TokenEvent>& want,
                                 double tolerance) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].token, want[i].token) << "token " << i;
    ASSERT_TRUE(got[i].logprobs && want[i].logprobs) << "token " << i;
    EXPECT_NEAR(got[i].logprobs->logprob, want[i].logprobs->logprob, tolerance) << "token " << i;
    ASSERT_EQ(got[i].logprobs->top.size(), want[i].logprobs->top.size());
    for (size_t j = 0; j < want[i].logprobs->top.size(); ++j)
      EXPECT_NEAR(got[i].logprobs->top[j].second, want[i].logprobs->top[j].second, tolerance)
          << "token " << i << " place " << j;
  }
}

}  // namespace tpserve::testing_util
