// Test helper: Qwen3's real tokenizer.json (fetched by launch/fetch-tokenizer into .deps), loaded once per
// test binary. Tests call it through QWEN3_TOKENIZER_OR_SKIP(), which skips with a reason when it is absent.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "runtime/serve/tokenizer.h"

namespace tpserve::serve::testing {

inline std::string qwen3_tokenizer_path() {
  return std::string(TPSERVE_SOURCE_DIR) + "/.deps/qwen3-tokenizer.json";
}

inline const Tokenizer* qwen3_tokenizer() {
  static const std::unique_ptr<Tokenizer> tokenizer =
      std::filesystem::exists(qwen3_tokenizer_path()) ? Tokenizer::load(qwen3_tokenizer_path()) : nullptr;
  return tokenizer.get();
}

inline nlohmann::json read_fixture(const std::string& relative) {
  std::ifstream in(std::string(TPSERVE_SOURCE_DIR) + "/tests/fixtures/" + relative);
  EXPECT_TRUE(in.good()) << "missing fixture " << relative;
  return nlohmann::json::parse(in);
}

}  // namespace tpserve::serve::testing

// QWEN3_TOKENIZER_OR_SKIP(tok); declares `const Tokenizer* tok`, or skips the test with a reason.
#define QWEN3_TOKENIZER_OR_SKIP(var)                                                     \
  const ::tpserve::serve::Tokenizer* var = ::tpserve::serve::testing::qwen3_tokenizer(); \
  if (var == nullptr)                                                                    \
  GTEST_SKIP()                                                                           \
      << ::tpserve::serve::testing::qwen3_tokenizer_path()                               \
      << " is missing: run launch/fetch-tokenizer (launch/setup does) to test against Qwen3's tokenizer"

// SKIP_WITHOUT_TOKENIZER(); skips the test with the same reason when the tokenizer is absent.
#define SKIP_WITHOUT_TOKENIZER()                                    \
  if (::tpserve::serve::testing::qwen3_tokenizer() == nullptr)      \
  GTEST_SKIP() << ::tpserve::serve::testing::qwen3_tokenizer_path() \
               << " is missing: run launch/fetch-tokenizer"
