// CLI11 validators the command lines share (tpserve, tpserve-gen, the benchmarks; header-only: only programs
// that parse a command line include it, and they link CLI11 already).
#pragma once

#include <CLI/CLI.hpp>

#include <string>

namespace tpserve {

// Digits only: CLI11 reads "-1" into an unsigned option as 2^64 - 1, and NonNegativeNumber's message
// prints the largest double.
inline CLI::Validator non_negative_integer() {
  return CLI::Validator(
      [](std::string& value) {
        return !value.empty() && value.find_first_not_of("0123456789") == std::string::npos
                   ? std::string()
                   : "expected a non-negative integer, got '" + value + "'";
      },
      "UINT");
}

}  // namespace tpserve
