// UTF-8 range splitting: a range of code points as byte-range sequences that match exactly the valid UTF-8
// encodings of those code points (no surrogates, nothing above U+10FFFF, no overlong forms). The regex
// automaton works on bytes, so every class of code points ('.', [^"], [à-ÿ]) is compiled through this.
#pragma once

#include <cstdint>
#include <vector>

namespace tpserve::serve {

struct ByteRange {
  uint8_t lo;
  uint8_t hi;  // inclusive
};

// One sequence matches the byte strings whose i-th byte lies in ranges[i]; all have the same length (1..4).
using Utf8Sequence = std::vector<ByteRange>;

// Sequences (disjoint, in increasing code point order) covering the encodings of [lo, hi] minus the
// surrogates U+D800..U+DFFF; hi is clamped to U+10FFFF. Empty when nothing remains.
std::vector<Utf8Sequence> utf8_sequences(char32_t lo, char32_t hi);

}  // namespace tpserve::serve
