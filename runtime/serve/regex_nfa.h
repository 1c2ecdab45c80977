// Thompson NFA over bytes, compiled from a regex syntax tree (runtime/serve/regex_parser.h): code point
// sets become alternatives of UTF-8 byte-range chains (runtime/serve/utf8_ranges.h), counted repetitions are
// unrolled. RegexDfa runs subset construction on it lazily.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "runtime/serve/regex_parser.h"

namespace tpserve::serve {

struct NfaState {
  enum class Kind : uint8_t { kByte, kEpsilon, kMatch };
  Kind kind = Kind::kEpsilon;
  uint8_t lo = 0, hi = 0;  // kByte: the byte range consumed (inclusive)
  int32_t out = -1;        // kByte, kEpsilon: the next state (-1: none)
  int32_t out1 = -1;       // kEpsilon: a second next state (-1: none)
};

struct Nfa {
  std::vector<NfaState> states;
  int32_t start = -1;
  int32_t match = -1;         // the one accepting state
  std::vector<uint8_t> live;  // live[s]: the match state can be reached from s
};

// Throws tpserve::Error when the NFA would need more than max_states states (naming the repetition that
// makes it so, when one does).
Nfa compile_nfa(const RegexNode& root, size_t max_states);

}  // namespace tpserve::serve
