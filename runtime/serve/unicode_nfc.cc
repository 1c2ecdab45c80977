#include "runtime/serve/unicode_nfc.h"

#include <algorithm>
#include <cstdint>
#include <tuple>
#include <utility>
#include <vector>

#include "common/error.h"
#include "runtime/serve/utf8.h"

namespace tpserve::serve {
namespace {

struct CombiningClassRange {
  char32_t first, last;
  uint8_t ccc;
};
struct Decomposition {
  char32_t cp, first, second;  // second == 0: a singleton decomposition
};
struct Composition {
  char32_t first, second, composite;
};

#include "runtime/serve/unicode_nfc_tables.inc"

// Hangul syllables (Unicode 3.12): S = SBase + (L * VCount + V) * TCount + T.
constexpr char32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr char32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount,
                   kSCount = kLCount * kNCount;

const Decomposition* find_decomposition(char32_t cp) {
  auto it = std::lower_bound(std::begin(kDecompositions), std::end(kDecompositions), cp,
                             [](const Decomposition& d, char32_t c) { return d.cp < c; });
  return it != std::end(kDecompositions) && it->cp == cp ? &*it : nullptr;
}

void decompose(char32_t cp, std::vector<char32_t>& out) {
  if (cp >= kSBase && cp < kSBase + kSCount) {
    const char32_t s = cp - kSBase;
    out.push_back(kLBase + s / kNCount);
    out.push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount != 0) out.push_back(kTBase + s % kTCount);
    return;
  }
  const Decomposition* d = cp < 0xC0 ? nullptr : find_decomposition(cp);
  if (d == nullptr) {
    out.push_back(cp);
    return;
  }
  decompose(d->first, out);
  if (d->second != 0) decompose(d->second, out);
}

// The composite of a starter and a following character, or 0 when they do not compose.
char32_t compose_pair(char32_t first, char32_t second) {
  if (first >= kLBase && first < kLBase + kLCount && second >= kVBase && second < kVBase + kVCount)
    return kSBase + ((first - kLBase) * kVCount + (second - kVBase)) * kTCount;
  if (first >= kSBase && first < kSBase + kSCount && (first - kSBase) % kTCount == 0 && second > kTBase &&
      second < kTBase + kTCount)
    return first + (second - kTBase);
  auto it = std::lower_bound(std::begin(kCompositions), std::end(kCompositions), std::pair(first, second),
                             [](const Composition& c, const std::pair<char32_t, char32_t>& key) {
                               return c.first != key.first ? c.first < key.first : c.second < key.second;
                             });
  if (it != std::end(kCompositions) && it->first == first && it->second == second) return it->composite;
  return 0;
}

}  // namespace

int canonical_combining_class(char32_t cp) {
  if (cp < 0x300) return 0;
  auto it = std::upper_bound(std::begin(kCombiningClasses), std::end(kCombiningClasses), cp,
                             [](char32_t c, const CombiningClassRange& r) { return c < r.first; });
  if (it == std::begin(kCombiningClasses)) return 0;
  --it;
  return cp <= it->last ? it->ccc : 0;
}

bool is_trivially_nfc(std::string_view utf8) {
  // Every code point below U+0300 is a starter without a canonical decomposition that composes with
  // nothing before it; U+0300 is the first combining mark, encoded as CC 80. Bytes below 0xCC therefore
  // (ASCII, and leads C2..CB) encode only such code points.
  for (char c : utf8)
    if (static_cast<uint8_t>(c) >= 0xCC) return false;
  return true;
}

std::string to_nfc(std::string_view utf8) {
  if (is_trivially_nfc(utf8)) return std::string(utf8);
  std::vector<char32_t> input;
  TPS_CHECK(decode_utf8(utf8, input), "NFC: the text is not valid UTF-8");

  // 1. Full canonical decomposition.
  std::vector<char32_t> chars;
  chars.reserve(input.size() + input.size() / 4);
  for (char32_t cp : input) decompose(cp, chars);

  // 2. Canonical ordering: stable sort of every run of non-starters by combining class.
  std::vector<int> ccc(chars.size());
  for (size_t i = 0; i < chars.size(); ++i) ccc[i] = canonical_combining_class(chars[i]);
  // A run is sorted as a whole (O(n log n)): swapping neighbours into place is quadratic in the run's
  // length, and a request can be one run of a million alternating marks.
  std::vector<std::pair<int, char32_t>> run;
  for (size_t begin = 0; begin < chars.size();) {
    if (ccc[begin] == 0) {
      ++begin;
      continue;
    }
    size_t end = begin;
    while (end < chars.size() && ccc[end] != 0) ++end;
    if (end - begin > 1) {
      run.clear();
      for (size_t i = begin; i < end; ++i) run.emplace_back(ccc[i], chars[i]);
      std::stable_sort(run.begin(), run.end(),
                       [](const auto& a, const auto& b) { return a.first < b.first; });
      for (size_t i = begin; i < end; ++i) std::tie(ccc[i], chars[i]) = run[i - begin];
    }
    begin = end;
  }

  // 3. Canonical composition (UAX #15): a character composes with the last starter unless a character in
  // between blocks it (a starter, or a class >= its own). last_class is the class of the last character
  // kept; 0 means that character is the starter itself (adjacent), 256 that no starter came yet.
  if (chars.empty()) return {};
  size_t starter = 0, out = 1;
  int last_class = ccc[0] == 0 ? 0 : 256;
  for (size_t i = 1; i < chars.size(); ++i) {
    const char32_t c = chars[i];
    const int cls = ccc[i];
    if (last_class < cls || last_class == 0) {
      if (const char32_t composite = compose_pair(chars[starter], c); composite != 0) {
        chars[starter] = composite;
        continue;
      }
    }
    if (cls == 0) starter = out;
    last_class = cls;
    chars[out++] = c;
  }
  chars.resize(out);

  std::string result;
  result.reserve(utf8.size());
  for (char32_t cp : chars) append_utf8(result, cp);
  return result;
}

}  // namespace tpserve::serve
