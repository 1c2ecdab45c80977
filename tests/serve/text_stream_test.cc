// Stop strings across token boundaries: text that could start a stop string is held back, the stop string
// and everything after it are dropped, and what is released stays valid UTF-8.
#include <gtest/gtest.h>

#include "runtime/serve/stop_string_matcher.h"
#include "runtime/serve/utf8.h"

namespace tpserve::serve {
namespace {

std::string run(StopStringMatcher& m, const std::vector<std::string>& pieces,
                std::vector<std::string>* released) {
  std::string out;
  for (const auto& p : pieces) {
    released->push_back(m.push(p));
    out += released->back();
    if (m.stopped()) return out;
  }
  return out + m.flush();
}

TEST(StopStrings, FoundAcrossPiecesAndNotEmitted) {
  StopStringMatcher m({"STOP"});
  std::vector<std::string> released;
  EXPECT_EQ(run(m, {"hello S", "T", "O", "P and more"}, &released), "hello ");
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.matched(), "STOP");
  EXPECT_EQ(released[0], "hello ");  // "S" held back
  EXPECT_EQ(released[1], "");
}

TEST(StopStrings, ReleasesHeldTextWhenItTurnsOutHarmless) {
  StopStringMatcher m({"STOP"});
  std::vector<std::string> released;
  EXPECT_EQ(run(m, {"ST", "ART", " ST"}, &released), "START ST");
  EXPECT_FALSE(m.stopped());
  EXPECT_EQ(released, (std::vector<std::string>{"", "START", " "}));
}

// Before min_tokens (may_stop false) text cannot end a stop string; one that ends in text pushed after can,
// even when it starts before.
TEST(StopStrings, OnlyThoseEndingAfterMinTokensCount) {
  StopStringMatcher m({"STOP"});
  EXPECT_EQ(m.push("a STOP b ST", false), "a STOP b ");  // "ST" held back: it may end after
  EXPECT_FALSE(m.stopped());
  EXPECT_EQ(m.push("OP c", true), "");
  EXPECT_TRUE(m.stopped());
  StopStringMatcher n({"STOP"});
  EXPECT_EQ(n.push("xSTOP", false), "xSTOP");
  EXPECT_EQ(n.push("y", true), "y");  // the unarmed match never counts
  EXPECT_FALSE(n.stopped());
  EXPECT_EQ(n.push("STOP", true), "");
  EXPECT_TRUE(n.stopped());
}

TEST(StopStrings, EarliestOfSeveral) {
  StopStringMatcher m({"world", "lo w"});
  std::vector<std::string> released;
  EXPECT_EQ(run(m, {"hello world"}, &released), "hel");
  EXPECT_EQ(m.matched(), "lo w");
}

TEST(StopStrings, MultibyteStopKeepsUtf8Valid) {
  StopStringMatcher m({"世界"});
  std::vector<std::string> released;
  EXPECT_EQ(run(m, {"你好", "世", "界!"}, &released), "你好");
  for (const auto& r : released) EXPECT_TRUE(is_valid_utf8(r));
  StopStringMatcher none({});
  EXPECT_EQ(none.push("abc"), "abc");
}

TEST(StopStrings, StopAtTheVeryStartAndNewlines) {
  StopStringMatcher m({"\n\n"});
  std::vector<std::string> released;
  EXPECT_EQ(run(m, {"\n", "\n", "x"}, &released), "");
  EXPECT_TRUE(m.stopped());
}

}  // namespace
}  // namespace tpserve::serve
