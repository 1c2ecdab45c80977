#include "runtime/serve/utf8_ranges.h"

#include <algorithm>
#include <string>

#include "runtime/serve/utf8.h"

namespace tpserve::serve {
namespace {

// [lo, hi] has no surrogate and one encoded length. Splits it until, at every continuation-byte position,
// the two ends either share all higher bits or span the whole 6-bit range below them; then the encodings of
// lo and hi give the byte range of each position and their cross product is exactly [lo, hi].
void split_same_length(char32_t lo, char32_t hi, std::vector<Utf8Sequence>& out) {
  if (hi < 0x80) {
    out.push_back({{static_cast<uint8_t>(lo), static_cast<uint8_t>(hi)}});
    return;
  }
  for (int i = 1; i < 4; ++i) {
    const char32_t low_bits = (char32_t{1} << (6 * i)) - 1;  // the last i continuation bytes
    if ((lo & ~low_bits) == (hi & ~low_bits)) continue;
    if ((lo & low_bits) != 0) {
      split_same_length(lo, lo | low_bits, out);
      split_same_length((lo | low_bits) + 1, hi, out);
      return;
    }
    if ((hi & low_bits) != low_bits) {
      split_same_length(lo, (hi & ~low_bits) - 1, out);
      split_same_length(hi & ~low_bits, hi, out);
      return;
    }
  }
  std::string a, b;
  append_utf8(a, lo);
  append_utf8(b, hi);
  Utf8Sequence seq;
  for (size_t k = 0; k < a.size(); ++k) {
    seq.push_back({static_cast<uint8_t>(a[k]), static_cast<uint8_t>(b[k])});
  }
  out.push_back(std::move(seq));
}

}  // namespace

std::vector<CodePointRange> merged_code_point_ranges(std::vector<CodePointRange> ranges) {
  std::sort(ranges.begin(), ranges.end(), [](CodePointRange a, CodePointRange b) { return a.lo < b.lo; });
  std::vector<CodePointRange> out;
  for (const CodePointRange& r : ranges) {
    if (!out.empty() && r.lo <= out.back().hi + 1)
      out.back().hi = std::max(out.back().hi, r.hi);
    else
      out.push_back(r);
  }
  return out;
}

std::vector<CodePointRange> complement_code_point_ranges(const std::vector<CodePointRange>& ranges) {
  std::vector<CodePointRange> out;
  char32_t next = 0;
  for (const CodePointRange& r : merged_code_point_ranges(ranges)) {
    if (r.lo > next) out.push_back({next, r.lo - 1});
    next = r.hi + 1;
  }
  if (next <= kMaxCodePoint) out.push_back({next, kMaxCodePoint});
  return out;
}

std::vector<Utf8Sequence> utf8_sequences(char32_t lo, char32_t hi) {
  std::vector<Utf8Sequence> out;
  hi = std::min(hi, kMaxCodePoint);
  // Pieces of one encoded length each (1, 2, 3, 4 bytes), the surrogates cut out of the 3-byte piece.
  const char32_t pieces[][2] = {
      {0, 0x7F}, {0x80, 0x7FF}, {0x800, 0xD7FF}, {0xE000, 0xFFFF}, {0x10000, kMaxCodePoint}};
  for (const auto& piece : pieces) {
    const char32_t a = std::max(lo, piece[0]), b = std::min(hi, piece[1]);
    if (a <= b) split_same_length(a, b, out);
  }
  return out;
}

}  // namespace tpserve::serve
