// The scheduler on its own (fake model results): continuous batching limits, chunked prefill, stop
// conditions, preemption when the KV cache is full (nothing lost), aborts and request validation.
#include <gtest/gtest.h>

#include <limits>
#include <map>

#include "common/error.h"
#include "runtime/engine/scheduler.h"

namespace tpserve {
namespace {

// Runs the scheduler to completion, answering every sampled row with `next(request position)`.
std::map<int64_t, std::vector<int32_t>> run(Scheduler& s, int* max_running = nullptr, int* steps = nullptr) {
  std::map<int64_t, std::vector<int32_t>> out;
  int n = 0;
  while (s.has_work()) {
    auto batch = s.schedule();
    EXPECT_TRUE(batch.has_value()) << "work left but nothing scheduled";
    if (!batch) break;
    if (max_running) *max_running = std::max(*max_running, s.num_running());
    StepResult r;
    for (size_t i = 0; i < batch->sample_rows.size(); ++i)
      r.tokens.push_back(static_cast<int32_t>(batch->sample_counters[i]));
    for (const auto& e : s.complete(r)) out[e.request_id].push_back(e.token);
    EXPECT_LT(++n, 10000);
  }
  if (steps) *steps = n;
  return out;
}

Request request(int64_t id, int prompt, int max_tokens) {
  Request r;
  r.id = id;
  for (int i = 0; i < prompt; ++i) r.prompt.push_back(100 + i);
  r.max_tokens = max_tokens;
  return r;
}

TEST(Scheduler, ContinuousBatchingRespectsMaxBatchAndFinishesEverything) {
  Scheduler s({.max_batch = 2, .max_step_tokens = 64, .max_seq_len = 128, .max_blocks_per_seq = 32}, 64, 4,
              {});
  for (int i = 1; i <= 5; ++i) s.add(request(i, 5 + i, 3 + i));
  int max_running = 0;
  const auto out = run(s, &max_running);
  EXPECT_EQ(max_running, 2);
  for (int i = 1; i <= 5; ++i) {
    ASSERT_EQ(out.at(i).size(), static_cast<size_t>(3 + i));
    for (int j = 0; j < 3 + i; ++j)
      EXPECT_EQ(out.at(i)[j], 5 + i + j);  // counter = position of the new token
  }
}

TEST(Scheduler, LongPromptsArePrefilledInChunks) {
  Scheduler s({.max_batch = 4, .max_step_tokens = 8, .max_seq_len = 128, .max_blocks_per_seq = 32}, 64, 4,
              {});
  s.add(request(1, 30, 2));
  auto b = s.schedule();
  ASSERT_TRUE(b);
  EXPECT_EQ(b->num_tokens(), 8);
  EXPECT_TRUE(b->sample_rows.empty());  // not the end of the prompt yet
  s.complete(StepResult{});
  int steps = 0;
  const auto out = run(s, nullptr, &steps);
  EXPECT_EQ(out.at(1), (std::vector<int32_t>{30, 31}));
}

TEST(Scheduler, StopTokensEosAndIgnoreEos) {
  Scheduler s({.max_batch = 4, .max_step_tokens = 64, .max_seq_len = 128, .max_blocks_per_seq = 32}, 64, 4,
              {12});
  Request a = request(1, 10, 50);  // draws 10, 11, 12 (eos) -> stops
  Request b = request(2, 10, 50);
  b.ignore_eos = true, b.stop_token_ids = {14};  // passes eos, stops at 14
  s.add(a), s.add(b);
  const auto out = run(s);
  EXPECT_EQ(out.at(1), (std::vector<int32_t>{10, 11, 12}));
  EXPECT_EQ(out.at(2), (std::vector<int32_t>{10, 11, 12, 13, 14}));
}

TEST(Scheduler, FullKvCachePreemptsAndRecomputesWithoutLosingTokens) {
  // 12 blocks of 4 tokens: three sequences growing to 24 tokens (6 blocks each) cannot all fit.
  Scheduler s({.max_batch = 3, .max_step_tokens = 64, .max_seq_len = 64, .max_blocks_per_seq = 16}, 12, 4,
              {});
  for (int i = 1; i <= 3; ++i) s.add(request(i, 8, 16));
  const auto out = run(s);
  EXPECT_GT(s.preemptions(), 0);
  for (int i = 1; i <= 3; ++i) {
    ASSERT_EQ(out.at(i).size(), 16u) << i;
    for (int j = 0; j < 16; ++j) EXPECT_EQ(out.at(i)[j], 8 + j);
  }
  EXPECT_DOUBLE_EQ(s.kv_usage(), 0.0);
}

TEST(Scheduler, AbortFreesTheSequence) {
  Scheduler s({.max_batch = 4, .max_step_tokens = 64, .max_seq_len = 128, .max_blocks_per_seq = 32}, 64, 4,
              {});
  s.add(request(1, 10, 100));
  s.add(request(2, 10, 3));
  ASSERT_TRUE(s.schedule());
  s.complete(StepResult{{10, 10}});
  s.abort(1);
  const auto out = run(s);
  EXPECT_EQ(out.at(2).size(), 2u);  // its first token came from the step above
  EXPECT_EQ(s.num_running(), 0);
  EXPECT_DOUBLE_EQ(s.kv_usage(), 0.0);
  const auto aborted = s.take_aborted();  // reported once
  ASSERT_EQ(aborted.size(), 1u);
  EXPECT_EQ(aborted[0].request_id, 1);
  EXPECT_EQ(aborted[0].finish, FinishReason::kAborted);
  EXPECT_TRUE(s.take_aborted().empty());
}

TEST(Scheduler, RejectsRequestsThatCanNeverRun) {
  Scheduler s({.max_batch = 4, .max_step_tokens = 64, .max_seq_len = 32, .max_blocks_per_seq = 8}, 4, 4, {});
  EXPECT_THROW(s.add(request(1, 0, 4)), Error);    // empty prompt
  EXPECT_THROW(s.add(request(2, 4, 0)), Error);    // max_tokens 0
  EXPECT_THROW(s.add(request(3, 30, 10)), Error);  // beyond max_seq_len
  EXPECT_THROW(s.add(request(4, 10, 10)), Error);  // needs 5 blocks, the cache has 4
  EXPECT_NO_THROW(s.add(request(5, 8, 8)));
}

TEST(Scheduler, MaxRequestTokensIsWhatAddTakes) {
  // Speculation (k = 1) keeps 2k tokens of a sequence's blocks for its last step's drafts.
  SpeculativeSettings spec;
  spec.num_tokens = 1;
  spec.script = [](int64_t, const std::vector<int32_t>&, int k) { return std::vector<int32_t>(k, 7); };
  Scheduler s({.max_batch = 4, .max_step_tokens = 64, .max_seq_len = 512, .max_blocks_per_seq = 40}, 8, 16,
              {}, spec);
  EXPECT_EQ(s.max_request_tokens(), 8 * 16 - 2);  // the cache binds, less the drafts' room
  EXPECT_NO_THROW(s.add(request(1, 3, static_cast<int>(s.max_request_tokens()) - 3)));
  EXPECT_THROW(s.add(request(2, 3, static_cast<int>(s.max_request_tokens()) - 2)), Error);
  EXPECT_THROW(s.add(request(3, 3, std::numeric_limits<int>::max())),
               Error);  // no int overflow past the checks
  // Without speculation: max_seq_len, or the blocks one sequence may hold.
  Scheduler plain({.max_batch = 4, .max_step_tokens = 64, .max_seq_len = 100, .max_blocks_per_seq = 32}, 64,
                  4, {});
  EXPECT_EQ(plain.max_request_tokens(), 100);
  Scheduler small({.max_batch = 4, .max_step_tokens = 64, .max_seq_len = 100, .max_blocks_per_seq = 32}, 5, 4,
                  {});
  EXPECT_EQ(small.max_request_tokens(), 20);
  EXPECT_NO_THROW(small.add(request(4, 10, 10)));
  EXPECT_THROW(small.add(request(5, 10, 11)), Error);
}

// Completes a step of `s` answering every sampled row with token 7 and rejecting every draft.
void complete_rejecting_drafts(Scheduler& s, const StepBatch& step) {
  StepResult r;
  for (size_t i = 0; i < step.sample_rows.size(); ++i) r.tokens.push_back(7);
  r.accepted.assign(step.num_groups(), 0);
  s.complete(r);
}

// Under speculation the model takes max_batch x (1 + k) rows a step even where runtime.max_num_batched_tokens
// is smaller; prefill chunks take at most the latter's tokens of a step.
TEST(Scheduler, PrefillChunksKeepToMaxBatchedTokensWhenDecodeRowsMayExceedIt) {
  SpeculativeSettings spec;
  spec.num_tokens = 2;
  spec.script = [](int64_t, const std::vector<int32_t>&, int k) { return std::vector<int32_t>(k, 7); };
  // Steps of up to 4 x 3 decode rows, prefill chunks of up to 8 tokens.
  const SchedulerLimits limits{.max_batch = 4,
                               .max_step_tokens = 12,
                               .max_seq_len = 128,
                               .max_blocks_per_seq = 32,
                               .max_prefill_step_tokens = 8};
  Scheduler s(limits, 256, 4, {}, spec);
  s.add(request(1, 30, 4));
  auto b = s.schedule();
  ASSERT_TRUE(b);
  EXPECT_EQ(b->num_tokens(), 8);  // not 12
  // Four sequences decoding with 2 drafts each: 12 rows, past the 8 of a prefill step.
  Scheduler d(limits, 256, 4, {}, spec);
  for (int i = 1; i <= 4; ++i) d.add(request(i, 2, 8));
  int max_tokens = 0;
  bool decode_past_prefill_limit = false;
  while (d.has_work()) {
    auto step = d.schedule();
    ASSERT_TRUE(step);
    max_tokens = std::max(max_tokens, step->num_tokens());
    decode_past_prefill_limit |= step->num_tokens() > 8 && d.last_step_mix().prefill_seqs == 0;
    complete_rejecting_drafts(d, *step);
  }
  EXPECT_EQ(max_tokens, 12);
  EXPECT_TRUE(decode_past_prefill_limit);

  // Requests arriving one a step fill the batch (decode rows do not use up the prefill budget), and a long
  // prompt behind more decode rows than the prefill budget still moves every step.
  Scheduler a({.max_batch = 8,
               .max_step_tokens = 24,
               .max_seq_len = 256,
               .max_blocks_per_seq = 64,
               .max_prefill_step_tokens = 8},
              1024, 4, {}, spec);
  auto run_step = [&] {
    auto step = a.schedule();
    ASSERT_TRUE(step);
    complete_rejecting_drafts(a, *step);
  };
  int most_running = 0;
  for (int i = 1; i <= 7; ++i) {
    a.add(request(i, 2, 40));
    run_step();
    most_running = std::max(most_running, a.num_running());
  }
  EXPECT_EQ(most_running, 7);
  a.add(request(100, 60, 4));  // 7 decoders x 3 rows = 21 rows ahead of it, more than the 8 of prefill
  for (int step_index = 0; step_index < 3; ++step_index) {
    run_step();
    EXPECT_EQ(a.last_step_mix().prefill_tokens, 24 - 21) << "step " << step_index;
  }
}

TEST(Scheduler, StepMixTellsDecodeFromPrefill) {
  Scheduler s({.max_batch = 4, .max_step_tokens = 8, .max_seq_len = 128, .max_blocks_per_seq = 32}, 64, 4,
              {});
  s.add(request(1, 9, 4));  // 9 prompt tokens: chunks of 8 and 1 (the last chunk of one token is prefill)
  ASSERT_TRUE(s.schedule());
  EXPECT_EQ(s.last_step_mix().prefill_seqs, 1);
  EXPECT_EQ(s.last_step_mix().prefill_tokens, 8);
  s.complete(StepResult{});
  ASSERT_TRUE(s.schedule());
  EXPECT_TRUE(s.last_step_mix().has_prefill());
  EXPECT_EQ(s.last_step_mix().prefill_tokens, 1);
  s.complete(StepResult{{7}});
  s.add(request(2, 3, 4));
  ASSERT_TRUE(s.schedule());  // request 1 decodes, request 2 is admitted
  EXPECT_EQ(s.last_step_mix().decode_seqs, 1);
  EXPECT_EQ(s.last_step_mix().prefill_seqs, 1);
  EXPECT_EQ(s.last_step_mix().prefill_tokens, 3);
  s.complete(StepResult{{7, 7}});
  ASSERT_TRUE(s.schedule());
  EXPECT_EQ(s.last_step_mix().decode_seqs, 2);
  EXPECT_FALSE(s.last_step_mix().has_prefill());
}

}  // namespace
}  // namespace tpserve
