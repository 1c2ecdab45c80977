// Logit bias, penalties and min_tokens: the entries a request's rows get (LogitAdjuster), the scheduler's
// handling of them (no speculation under penalties, per-row min_tokens masks in verification groups, a step's
// room for them, refusals), and the CPU op that applies them (against the formula, per vocabulary slice).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>

#include "common/error.h"
#include "runtime/backend/backend.h"
#include "runtime/engine/scheduler.h"

namespace tpserve {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// (token -> entry) of one row, to compare without depending on the order of the entries.
std::map<int32_t, LogitAdjustment> by_token(const std::vector<LogitAdjustment>& entries, int32_t row) {
  std::map<int32_t, LogitAdjustment> out;
  for (const auto& a : entries) {
    if (a.row != row) continue;
    EXPECT_TRUE(out.emplace(a.token, a).second) << "token " << a.token << " named twice";
  }
  return out;
}

TEST(LogitAdjuster, BiasPenaltiesAndMinTokensInVllmsTerms) {
  LogitProcessing p;
  p.logit_bias = {{5, 2.0f}, {9, -1.0f}};
  p.repetition_penalty = 1.5f;
  p.frequency_penalty = 0.25f;
  p.presence_penalty = 0.5f;
  p.min_tokens = 2;
  LogitAdjuster a(p, /*prompt=*/{3, 3, 5}, /*stop_tokens=*/{7});
  EXPECT_TRUE(a.penalized());
  a.observe(9);
  a.observe(4);
  a.observe(9);
  std::vector<LogitAdjustment> out;
  a.append(/*row=*/1, /*index=*/1, out);  // a row drawing the second generated token: min_tokens masks
  const auto row = by_token(out, 1);
  ASSERT_EQ(row.size(), 5u);         // 3, 4, 5, 7, 9
  EXPECT_EQ(row.at(3).scale, 1.5f);  // in the prompt: repetition only
  EXPECT_EQ(row.at(3).subtract, 0.0f);
  EXPECT_EQ(row.at(3).bias, 0.0f);
  EXPECT_EQ(row.at(5).bias, 2.0f);  // bias and the prompt's repetition penalty
  EXPECT_EQ(row.at(5).scale, 1.5f);
  EXPECT_EQ(row.at(9).bias, -1.0f);  // generated twice: 2 x 0.25 + 0.5
  EXPECT_FLOAT_EQ(row.at(9).subtract, 1.0f);
  EXPECT_EQ(row.at(9).scale, 1.5f);
  EXPECT_FLOAT_EQ(row.at(4).subtract, 0.75f);
  EXPECT_EQ(row.at(7).bias, -kInf);  // a stop token before min_tokens
  EXPECT_EQ(row.at(7).scale, 1.0f);
  out.clear();
  a.append(0, 2, out);  // from min_tokens on the stop token is free again: no entry
  EXPECT_EQ(by_token(out, 0).count(7), 0u);
  EXPECT_EQ(out.size(), 4u);
  EXPECT_EQ(a.max_row_entries(), 5);
}

TEST(LogitAdjuster, OnlyWhatChangesALogitIsNamed) {
  LogitProcessing p;
  p.frequency_penalty = 0.5f;  // no repetition penalty: the prompt does not matter
  LogitAdjuster a(p, {1, 2, 3}, {7});
  std::vector<LogitAdjustment> out;
  a.append(0, 0, out);
  EXPECT_TRUE(out.empty());
  a.observe(2);
  a.append(0, 1, out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].token, 2);
  EXPECT_EQ(out[0].subtract, 0.5f);
  LogitAdjuster bias_only(LogitProcessing{.logit_bias = {{4, 1.0f}}}, {1}, {7});
  EXPECT_FALSE(bias_only.penalized());
  bias_only.observe(4);  // not tracked without penalties
  EXPECT_EQ(bias_only.max_row_entries(), 1);
}

TEST(LogitAdjustOp, AppliesTheFormulaToItsOwnSliceOnly) {
  auto be = make_cpu_backend();
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  const int rows = 3, slice = 20;  // this rank holds ids [20, 40) of a vocabulary of 40
  std::vector<float> logits(rows * slice);
  for (float& x : logits) x = normal(rng);
  const std::vector<int32_t> targets = {0, 25, 2, 39, 1, 20, 0, 3 /* another rank's */, 2, 21};
  const std::vector<float> values = {1.5f, 1.0f, 0.0f, 0.0f, 2.0f,  0.0f, -kInf, 1.0f,
                                     0.0f, 9.0f, 9.0f, 9.0f, -0.5f, 1.3f, 0.7f};
  Tensor l = be->alloc(DType::kF32, {rows, slice}), t = be->alloc(DType::kI32, {5, 2});
  Tensor v = be->alloc(DType::kF32, {5, 3});
  be->copy_from_host(l, logits.data());
  be->copy_from_host(t, targets.data());
  be->copy_from_host(v, values.data());
  be->adjust_logits(l, slice, t, v);
  std::vector<float> want = logits;
  auto apply = [&](int row, int token, float bias, float scale, float subtract) {
    float& x = want[row * slice + token - slice];
    const float y = x + bias;
    x = (y > 0 ? y / scale : y * scale) - subtract;
  };
  apply(0, 25, 1.5f, 1.0f, 0.0f);
  apply(2, 39, 0.0f, 2.0f, 0.0f);
  apply(1, 20, -kInf, 1.0f, 0.0f);
  apply(2, 21, -0.5f, 1.3f, 0.7f);
  std::vector<float> got(logits.size());
  be->copy_to_host(got.data(), l);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], want[i]) << i;
  EXPECT_EQ(got[1 * slice + 0], -kInf);
}

Request request(int64_t id, std::vector<int32_t> prompt, int max_tokens, LogitProcessing p = {}) {
  Request r;
  r.id = id;
  r.prompt = std::move(prompt);
  r.max_tokens = max_tokens;
  r.ignore_eos = true;
  r.processing = std::move(p);
  return r;
}

SchedulerLimits limits(int max_adjustments = 65536) {
  return {.max_batch = 4,
          .max_step_tokens = 64,
          .max_seq_len = 128,
          .max_blocks_per_seq = 32,
          .max_logit_adjustments = max_adjustments};
}

SpeculativeSettings scripted(int k) {
  SpeculativeSettings spec;
  spec.num_tokens = k;
  spec.script = [](int64_t, const std::vector<int32_t>& tokens, int n) {
    std::vector<int32_t> d;
    for (int j = 0; j < n; ++j) d.push_back(static_cast<int32_t>(tokens.size()) + j);  // what run() emits
    return d;
  };
  return spec;
}

// Answers every row with its counter (so scripted drafts of "the next position" are all accepted) and hands
// each step's batch to `inspect`.
template <typename Inspect>
std::map<int64_t, std::vector<int32_t>> run(Scheduler& s, Inspect&& inspect) {
  std::map<int64_t, std::vector<int32_t>> out;
  for (int n = 0; s.has_work() && n < 1000; ++n) {
    auto batch = s.schedule();
    if (!batch) break;
    inspect(*batch);
    StepResult r;
    for (int64_t c : batch->sample_counters) r.tokens.push_back(static_cast<int32_t>(c));
    for (size_t g = 0; g + 1 < batch->group_start.size(); ++g)
      r.accepted.push_back(batch->group_start[g + 1] - batch->group_start[g] - 1);
    for (const auto& e : s.complete(r)) out[e.request_id].push_back(e.token);
  }
  return out;
}

TEST(SchedulerLogitProcessing, PenalisedRequestsAreNotSpeculatedBiasedOnesAre) {
  Scheduler s(limits(), 64, 4, {}, scripted(2));
  s.add(request(1, {1, 2, 3}, 6, LogitProcessing{.presence_penalty = 0.5f}));
  s.add(request(2, {1, 2, 3}, 6, LogitProcessing{.logit_bias = {{50, 3.0f}}}));
  int groups_of_one = 0, groups_of_three = 0;
  const auto out = run(s, [&](const StepBatch& b) {
    for (size_t g = 0; g + 1 < b.group_start.size(); ++g) {
      const int rows = b.group_start[g + 1] - b.group_start[g];
      rows == 1 ? ++groups_of_one : ++groups_of_three;
      // Every row of a biased group carries the bias.
      for (int r = b.group_start[g]; r < b.group_start[g + 1]; ++r)
        EXPECT_FALSE(by_token(b.logit_adjustments, r).empty() && rows == 3) << "row " << r;
    }
  });
  EXPECT_EQ(out.at(1).size(), 6u);
  EXPECT_EQ(out.at(2).size(), 6u);
  EXPECT_EQ(groups_of_one, 6 + 1);  // the penalised request: one token a step; the other's first
  EXPECT_GT(groups_of_three, 0);
}

TEST(SchedulerLogitProcessing, MinTokensMasksEachVerifiedRowByItsOwnIndex) {
  Scheduler s(limits(), 64, 4, {99}, scripted(2));
  Request r = request(1, {1, 2, 3}, 8, LogitProcessing{.min_tokens = 3});
  r.ignore_eos = false;
  s.add(r);
  std::vector<int> masked_counters;  // counter (position drawn) of every row that masks EOS
  run(s, [&](const StepBatch& b) {
    for (const auto& a : b.logit_adjustments) {
      EXPECT_EQ(a.token, 99);
      EXPECT_EQ(a.bias, -kInf);
      masked_counters.push_back(static_cast<int>(b.sample_counters[a.row]));
    }
  });
  // Generated tokens 0, 1, 2 are drawn at positions 3, 4, 5 (the prompt has 3 tokens).
  EXPECT_EQ(masked_counters, (std::vector<int>{3, 4, 5}));
}

// vLLM masks the model's EOS before min_tokens even under ignore_eos; ids beyond the vocabulary are left out.
TEST(SchedulerLogitProcessing, MinTokensMasksEosEvenUnderIgnoreEos) {
  SchedulerLimits l = limits();
  l.vocab_size = 1000;
  Scheduler s(l, 64, 4, {99, 5000});
  s.add(request(1, {1, 2, 3}, 4, LogitProcessing{.min_tokens = 2}));  // request() sets ignore_eos
  auto b = s.schedule();
  ASSERT_TRUE(b);
  ASSERT_EQ(b->logit_adjustments.size(), 1u);
  EXPECT_EQ(b->logit_adjustments[0].token, 99);
  EXPECT_EQ(b->logit_adjustments[0].bias, -kInf);
}

TEST(SchedulerLogitProcessing, PenaltiesCountTheGeneratedTokensAcrossAPreemption) {
  // A KV cache too small for both: the second is preempted and recomputed; its counts stay right.
  Scheduler s({.max_batch = 2, .max_step_tokens = 64, .max_seq_len = 64, .max_blocks_per_seq = 16}, 6, 4, {});
  s.add(request(1, {1, 2, 3, 4, 5, 6, 7, 8}, 8));
  s.add(request(2, {1, 2, 3, 4, 5, 6, 7, 8}, 8, LogitProcessing{.frequency_penalty = 1.0f}));
  run(s, [&](const StepBatch& b) {
    for (size_t r = 0; r < b.sample_rows.size(); ++r) {
      // Request 2's generated tokens are its counters 8, 9, ...: each generated once before this row.
      const auto row = by_token(b.logit_adjustments, static_cast<int32_t>(r));
      if (row.empty()) continue;
      const int64_t counter = b.sample_counters[r];
      EXPECT_EQ(static_cast<int64_t>(row.size()), counter - 8);
      for (const auto& [token, a] : row) {
        EXPECT_GE(token, 8);
        EXPECT_LT(token, counter);
        EXPECT_EQ(a.subtract, 1.0f);
      }
    }
  });
  EXPECT_GT(s.preemptions(), 0);
}

TEST(SchedulerLogitProcessing, ASequenceWaitsForAStepWithRoomForItsAdjustments) {
  // Room for 10 adjustments a step: two requests biasing 6 tokens each cannot share one.
  Scheduler s(limits(10), 64, 4, {});
  LogitProcessing p;
  for (int t = 0; t < 6; ++t) p.logit_bias.emplace_back(60 + t, 1.0f);
  s.add(request(1, {1, 2}, 3, p));
  s.add(request(2, {1, 2}, 3, p));
  int steps = 0;
  const auto out = run(s, [&](const StepBatch& b) {
    ++steps;
    EXPECT_LE(b.logit_adjustments.size(), 10u);
    EXPECT_EQ(b.num_samples(), 1);
  });
  EXPECT_EQ(out.at(1).size(), 3u);
  EXPECT_EQ(out.at(2).size(), 3u);
  EXPECT_EQ(steps, 6);
}

TEST(SchedulerLogitProcessing, RefusesWhatCouldNeverFitOrIsNotANumber) {
  Scheduler s(limits(100), 64, 4, {});
  // Penalties: up to max_tokens generated tokens named in one row, beside the prompt's with repetition.
  EXPECT_THROW(s.add(request(1, {1, 2}, 101, LogitProcessing{.frequency_penalty = 0.1f})), Error);
  s.add(request(2, {1, 2}, 100, LogitProcessing{.frequency_penalty = 0.1f}));
  EXPECT_THROW(s.add(request(3, {1}, 4, LogitProcessing{.repetition_penalty = 0.0f})), Error);
  EXPECT_THROW(s.add(request(4, {1}, 4, LogitProcessing{.presence_penalty = NAN})), Error);
  EXPECT_THROW(s.add(request(5, {1}, 4, LogitProcessing{.logit_bias = {{3, INFINITY}}})), Error);
  EXPECT_THROW(s.add(request(6, {1}, 4, LogitProcessing{.logit_bias = {{-1, 1.0f}}})), Error);
  EXPECT_THROW(s.add(request(7, {1}, 4, LogitProcessing{.min_tokens = -1})), Error);
  // A penalty so small that dividing a logit by it overflows a float.
  EXPECT_THROW(s.add(request(8, {1}, 4, LogitProcessing{.repetition_penalty = 1e-39f})), Error);
  SchedulerLimits l = limits(100);
  l.vocab_size = 1000;
  Scheduler v(l, 64, 4, {});
  EXPECT_THROW(v.add(request(9, {1}, 4, LogitProcessing{.logit_bias = {{1000, 1.0f}}})), Error);
  Request stop = request(10, {1}, 4, LogitProcessing{.min_tokens = 1});
  stop.stop_token_ids = {1000};
  EXPECT_THROW(v.add(stop), Error);
  v.add(request(11, {1}, 4, LogitProcessing{.logit_bias = {{999, 1.0f}}}));
}

// Token masks (structured output): a rank's slice [20, 52) of a 52-token vocabulary, two rows masked with
// masks that name tokens on both sides of a word boundary; the third row untouched.
TEST(LogitMaskOp, KeepsTheAllowedTokensOfItsOwnSliceOnly) {
  auto be = make_cpu_backend();
  const int rows = 3, slice = 32, begin = 20, words = 2;  // mask_words(52) = 2
  std::vector<float> logits(rows * slice);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = 0.25f * static_cast<float>(i) - 7.0f;
  const std::vector<int32_t> mask_rows = {2, 0};
  std::vector<uint32_t> masks(2 * words, 0u);
  const std::vector<std::vector<int32_t>> allowed = {{3, 20, 31, 32, 51}, {21, 33}};
  for (int m = 0; m < 2; ++m)
    for (int32_t t : allowed[m]) masks[m * words + t / 32] |= 1u << (t % 32);
  Tensor l = be->alloc(DType::kF32, {rows, slice}), r = be->alloc(DType::kI32, {2});
  Tensor k = be->alloc(DType::kI32, {2, words});
  be->copy_from_host(l, logits.data());
  be->copy_from_host(r, mask_rows.data());
  be->copy_from_host(k, masks.data());
  be->mask_logits(l, begin, r, k);
  std::vector<float> got(logits.size());
  be->copy_to_host(got.data(), l);
  for (int row = 0; row < rows; ++row)
    for (int v = 0; v < slice; ++v) {
      const int32_t t = begin + v;
      const int m = row == 2 ? 0 : row == 0 ? 1 : -1;
      const bool keep = m < 0 || std::count(allowed[m].begin(), allowed[m].end(), t) > 0;
      EXPECT_EQ(got[row * slice + v], keep ? logits[row * slice + v] : -kInf)
          << "row " << row << " token " << t;
    }
}

}  // namespace
}  // namespace tpserve
