#include <gtest/gtest.h>

#include "common/error.h"

namespace tpserve {
namespace {

std::string message_of(void (*fn)()) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "<no exception>";
}

TEST(ErrorMacros, CheckCarriesConditionDetailFileAndLine) {
  const std::string msg = message_of([] {
    const int heads = 3;
    TPS_CHECK(heads % 2 == 0, "heads=", heads, " must be even");
  });
  EXPECT_NE(msg.find("check failed: heads % 2 == 0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("heads=3 must be even"), std::string::npos) << msg;
  EXPECT_NE(msg.find("error_test.cc:"), std::string::npos) << msg;
}

TEST(ErrorMacros, PassingCheckDoesNotThrow) {
  EXPECT_NO_THROW(TPS_CHECK(1 + 1 == 2, "math"));
}

TEST(ErrorMacros, ThrowHasMessageAndLocation) {
  const std::string msg = message_of([] { TPS_THROW("tensor '", "x", "' missing"); });
  EXPECT_EQ(msg.rfind("tensor 'x' missing (at error_test.cc:", 0), 0u) << msg;
}

}  // namespace
}  // namespace tpserve
