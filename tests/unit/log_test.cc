#include <gtest/gtest.h>

#include <cstdlib>

#include "common/log.h"

namespace tpserve {
namespace {

TEST(Log, ParsesLevels) {
  EXPECT_EQ(parse_log_level("debug"), LogLevel::kDebug);
  EXPECT_EQ(parse_log_level("warning"), LogLevel::kWarn);
  EXPECT_FALSE(parse_log_level("loud").has_value());
}

TEST(Log, EnvironmentOverridesAndRankAppears) {
  set_log_level(LogLevel::kInfo);
  setenv("TPSERVE_LOG_LEVEL", "error", 1);
  apply_log_level_env();
  EXPECT_EQ(log_level(), LogLevel::kError);
  setenv("TPSERVE_LOG_LEVEL", "nonsense", 1);
  apply_log_level_env();  // ignored with a warning
  EXPECT_EQ(log_level(), LogLevel::kError);
  unsetenv("TPSERVE_LOG_LEVEL");

  set_log_level(LogLevel::kInfo);
  set_log_rank(3);
  testing::internal::CaptureStderr();
  log_info("hello ", 42);
  log_debug("hidden");
  const std::string out = testing::internal::GetCapturedStderr();
  set_log_rank(0);
  EXPECT_NE(out.find("[r3] hello 42"), std::string::npos) << out;
  EXPECT_EQ(out.find("hidden"), std::string::npos) << out;
}

}  // namespace
}  // namespace tpserve
