// Regex parser for structured output: turns a pattern (Python re / ECMAScript-like syntax, what JSON-schema
// converters and users write) into a syntax tree of code point sets, concatenations, alternations and
// counted repetitions. Only regular constructs are accepted; anything else (backreferences, lookaround,
// anchors inside the pattern, word boundaries, possessive quantifiers, inline flags) is refused with a
// tpserve::Error naming the construct and its character offset.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "runtime/serve/utf8_ranges.h"

namespace tpserve::serve {

struct RegexNode {
  enum class Kind { kEmpty, kSet, kConcat, kAlternate, kRepeat };
  Kind kind = Kind::kEmpty;
  std::vector<CodePointRange> set;  // kSet: sorted, disjoint, not touching; empty matches nothing
  std::vector<RegexNode> children;  // kConcat, kAlternate: the parts; kRepeat: the one repeated node
  int min = 0;                      // kRepeat
  int max = -1;                     // kRepeat: -1 = unbounded
  size_t offset = 0;                // kRepeat: character offset of the quantifier (for errors)
  std::string quantifier;           // kRepeat: the quantifier as written, e.g. "{2,5}"
};

// The whole pattern is one match (a leading '^' and a trailing '$' of a top-level alternative are accepted
// and mean nothing more). Offsets in errors count code points from 0.
RegexNode parse_regex(std::string_view pattern);

}  // namespace tpserve::serve
