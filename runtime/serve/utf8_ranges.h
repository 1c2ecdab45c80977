// UTF-8 range splitting: a range of code points as byte-range sequences that match exactly the valid UTF-8
// encodings of those code points (no surrogates, nothing above U+10FFFF, no overlong forms). The regex
// automaton works on bytes, so every class of code points ('.', [^"], [à-ÿ]) is compiled through this.
#pragma once

#include <cstdint>
#include <vector>

namespace tpserve::serve {

inline constexpr char32_t kMaxCodePoint = 0x10FFFF;

struct CodePointRange {
  char32_t lo;
  char32_t hi;  // inclusive
};

// The code points of `ranges` as ranges sorted, disjoint and not touching.
std::vector<CodePointRange> merged_code_point_ranges(std::vector<CodePointRange> ranges);
// The code points 0..kMaxCodePoint that `ranges` leaves out, merged as above.
std::vector<CodePointRange> complement_code_point_ranges(const std::vector<CodePointRange>& ranges);

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
