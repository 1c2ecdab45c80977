// Structured output in the scheduler (fake model results, a rule over token ids): the mask each constrained
// row carries, stop tokens allowed only once the text is whole, a finished rule ending the request, a
// broken one aborting it, no speculation, and a rule that begins after a given token.
#include <gtest/gtest.h>

#include <memory>

#include "common/error.h"
#include "runtime/engine/scheduler.h"
#include "tests/unit/modulo_constraint.h"

namespace tpserve {
namespace {

using testing_util::ModuloConstraint;

constexpr int32_t kVocab = 100, kEos = 1, kStopId = 6;

SchedulerLimits limits() {
  return {.max_batch = 4,
          .max_step_tokens = 64,
          .max_seq_len = 128,
          .max_blocks_per_seq = 32,
          .vocab_size = kVocab};
}

Request constrained(int64_t id, std::shared_ptr<TokenConstraint> rule, bool ignore_eos = false) {
  return Request{.id = id,
                 .prompt = {40, 41, 42},
                 .max_tokens = 10,
                 .stop_token_ids = {kStopId},
                 .ignore_eos = ignore_eos,
                 .constraint = std::move(rule)};
}

std::vector<int32_t> allowed_ids(const StepBatch& b, size_t m) {
  const int words = mask_words(kVocab);
  EXPECT_EQ(b.token_masks.size(), b.mask_rows.size() * words);
  std::vector<int32_t> ids;
  for (int32_t t = 0; t < kVocab; ++t)
    if ((b.token_masks[m * words + t / 32] >> (t % 32)) & 1u) ids.push_back(t);
  return ids;
}

// One step answering the single sampled row with `token`.
std::vector<TokenEvent> answer(Scheduler& s, int32_t token) {
  StepResult r;
  r.tokens = {token};
  return s.complete(r);
}

TEST(TokenConstraint, MasksHoldTheRulesTokensAndStopTokensOnceWhole) {
  for (const bool ignore_eos : {false, true}) {
    Scheduler s(limits(), 64, 4, {kEos});
    auto rule = std::make_shared<ModuloConstraint>(5, 3, /*open_end=*/true);
    s.add(constrained(1, rule, ignore_eos));
    const std::vector<int32_t> tokens = {5, 4, 3};  // (t + n) % 5 == 0 after n tokens
    for (size_t n = 0; n < tokens.size(); ++n) {
      auto b = s.schedule();
      ASSERT_TRUE(b);
      ASSERT_EQ(b->mask_rows, std::vector<int32_t>{0});
      std::vector<int32_t> want;
      for (int32_t t = 0; t < kVocab; ++t)
        if ((t + static_cast<int>(n)) % 5 == 0) want.push_back(t);
      EXPECT_EQ(allowed_ids(*b, 0), want) << "token " << n;  // not whole: no stop tokens
      const auto events = answer(s, tokens[n]);
      ASSERT_EQ(events.size(), 1u);
      EXPECT_EQ(events[0].finish, FinishReason::kNone);
    }
    auto b = s.schedule();
    ASSERT_TRUE(b);
    std::vector<int32_t> want;
    for (int32_t t = 0; t < kVocab; ++t)
      if ((t + 3) % 5 == 0 || t == kStopId || (t == kEos && !ignore_eos)) want.push_back(t);
    EXPECT_EQ(allowed_ids(*b, 0), want) << "ignore_eos " << ignore_eos;
    const auto events = answer(s, kStopId);
    ASSERT_EQ(events.size(), 1u);
    EXPECT_EQ(events[0].finish, FinishReason::kStop);
    EXPECT_EQ(rule->advanced, tokens);  // stop tokens are not the rule's
  }
}

TEST(TokenConstraint, AFinishedRuleEndsTheRequestWithItsLastToken) {
  Scheduler s(limits(), 64, 4, {kEos});
  s.add(constrained(1, std::make_shared<ModuloConstraint>(3, 2)));
  ASSERT_TRUE(s.schedule());
  EXPECT_EQ(answer(s, 3)[0].finish, FinishReason::kNone);
  ASSERT_TRUE(s.schedule());
  const auto events = answer(s, 2);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].finish, FinishReason::kComplete);
  EXPECT_FALSE(s.has_work());
}

TEST(TokenConstraint, ATokenTheRuleRefusesAbortsTheRequest) {
  Scheduler s(limits(), 64, 4, {kEos});
  s.add(constrained(1, std::make_shared<ModuloConstraint>(3, 5)));
  s.add(Request{.id = 2, .prompt = {50, 51}, .max_tokens = 3});
  ASSERT_TRUE(s.schedule());
  StepResult r;
  r.tokens = {4, 60};  // 4 % 3 != 0
  const auto events = s.complete(r);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].finish, FinishReason::kAborted);
  EXPECT_EQ(events[1].finish, FinishReason::kNone);  // the other request goes on
  EXPECT_EQ(s.num_running(), 1);
}

TEST(TokenConstraint, ConstrainedRequestsAreNotSpeculated) {
  SpeculativeSettings spec;
  spec.num_tokens = 2;
  spec.script = [](int64_t, const std::vector<int32_t>&, int k) { return std::vector<int32_t>(k, 9); };
  Scheduler s(limits(), 64, 4, {kEos}, spec);
  s.add(constrained(1, std::make_shared<ModuloConstraint>(1, 50, true)));
  s.add(Request{.id = 2, .prompt = {50, 51}, .max_tokens = 5});
  for (int step = 0; step < 3; ++step) {
    auto b = s.schedule();
    ASSERT_TRUE(b);
    // Prefill: one row each; then the plain request verifies 2 drafts, the constrained one none.
    const std::vector<int32_t> want =
        step == 0 ? std::vector<int32_t>{0, 1, 2} : std::vector<int32_t>{0, 1, 4};
    EXPECT_EQ(b->group_start, want) << "step " << step;
    EXPECT_EQ(b->mask_rows, std::vector<int32_t>{0});
    StepResult r;
    r.tokens.assign(b->sample_rows.size(), 9);
    r.accepted.assign(b->num_groups(), 0);
    s.complete(r);
  }
}

TEST(TokenConstraint, ARuleThatBeginsAfterATokenLeavesTheRowsBeforeItFree) {
  Scheduler s(limits(), 64, 4, {kEos});
  auto rule = std::make_shared<ModuloConstraint>(5, 3, false, /*begin_after=*/9);
  s.add(constrained(1, rule));
  for (const int32_t token : {11, 9}) {
    auto b = s.schedule();
    ASSERT_TRUE(b);
    EXPECT_TRUE(b->mask_rows.empty() && b->token_masks.empty());
    answer(s, token);
  }
  auto b = s.schedule();
  ASSERT_TRUE(b);
  EXPECT_EQ(b->mask_rows.size(), 1u);
  EXPECT_EQ(allowed_ids(*b, 0).front(), 0);
}

TEST(TokenConstraint, NeedsTheVocabularySize) {
  SchedulerLimits l = limits();
  l.vocab_size = 0;
  Scheduler s(l, 64, 4, {kEos});
  EXPECT_THROW(s.add(constrained(1, std::make_shared<ModuloConstraint>(3, 2))), Error);
}

}  // namespace
}  // namespace tpserve
