// tp_decode's scripted drafts: the reference's tokens at the right positions, a wrong token (right + 1) at
// the rate asked for, decided once per (run, request, position), and nothing past the reference.
#include "bench/tp_decode/scripted_drafts.h"

#include <gtest/gtest.h>

#include "common/error.h"

namespace tpserve::bench {
namespace {

std::shared_ptr<ReferenceContinuations> reference_with(std::vector<int32_t> continuation, int vocab = 100) {
  auto ref = std::make_shared<ReferenceContinuations>(vocab);
  ref->add(4, 1, 3, std::move(continuation));
  return ref;
}

TEST(ScriptedDrafts, AllRightProposesTheReferenceFromTheGeneratedPosition) {
  ScriptedDraftSource source(reference_with({10, 11, 12, 13}), 1.0, /*prompt_len=*/5, 7);
  source.set_run(4, 1);
  const std::vector<int32_t> prompt_and_one = {1, 2, 3, 4, 5, 10};  // one token generated
  EXPECT_EQ(source.propose(3, prompt_and_one, 2), (std::vector<int32_t>{11, 12}));
  EXPECT_EQ(source.propose(3, prompt_and_one, 4), (std::vector<int32_t>{11, 12, 13, 0}));  // past the end
  EXPECT_EQ(source.propose(9, prompt_and_one, 2), (std::vector<int32_t>{0, 0}));           // no such request
  source.set_run(4, 0);
  EXPECT_EQ(source.propose(3, prompt_and_one, 1), (std::vector<int32_t>{0}));  // no such round
}

TEST(ScriptedDrafts, AllWrongProposesTheNextIdModuloTheVocabulary) {
  ScriptedDraftSource source(reference_with({99, 5}, 100), 0.0, 1, 7);
  source.set_run(4, 1);
  EXPECT_EQ(source.propose(3, {42}, 2), (std::vector<int32_t>{0, 6}));
}

TEST(ScriptedDrafts, RightAtTheRateAskedForAndTheSameEveryTime) {
  const std::vector<int32_t> continuation(20000, 1);
  for (double rate : {0.25, 0.5, 0.9}) {
    ScriptedDraftSource source(reference_with(continuation), rate, 1, 11);
    source.set_run(4, 1);
    int right = 0;
    for (int at = 0; at < 20000; ++at) right += source.right_at(3, at) ? 1 : 0;
    EXPECT_NEAR(right / 20000.0, rate, 0.015) << rate;  // binomial sd <= 0.0036
    for (int at = 0; at < 100; ++at) EXPECT_EQ(source.right_at(3, at), source.right_at(3, at));
  }
}

TEST(ScriptedDrafts, RejectsBadSettings) {
  EXPECT_THROW(ScriptedDraftSource(nullptr, 0.5, 1, 0), Error);
  EXPECT_THROW(ScriptedDraftSource(reference_with({1}), 1.5, 1, 0), Error);
  EXPECT_THROW(ScriptedDraftSource(reference_with({1}), 0.5, 0, 0), Error);
  EXPECT_THROW(ScriptedDraftSource(reference_with({1}, 1), 0.5, 1, 0), Error);
}

}  // namespace
}  // namespace tpserve::bench
