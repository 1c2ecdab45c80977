#include "runtime/serve/json_number_range.h"

#include <algorithm>
#include <vector>

#include "common/error.h"
#include "runtime/serve/json_value_regex.h"

namespace tpserve::serve {
namespace {

constexpr std::string_view kAnyFraction = R"((?:\.[0-9]+)?)";
constexpr std::string_view kZeroFraction = R"((?:\.0+)?)";
constexpr std::string_view kNonZeroFraction = R"(\.[0-9]*[1-9][0-9]*)";

std::string alternation(const std::vector<std::string>& alternatives) {
  std::string out;
  for (const std::string& a : alternatives) out += (out.empty() ? "" : "|") + a;
  return alternatives.size() == 1 ? alternatives[0] : regex_group(out);
}

std::string digit_class(char a, char b) {
  return a == b ? std::string(1, a) : std::string("[") + a + "-" + b + "]";
}

std::string any_digits(size_t n) {
  return n == 0 ? "" : n == 1 ? "[0-9]" : "[0-9]{" + std::to_string(n) + "}";
}

// Digit strings of lo's length between lo and hi (same length, lo <= hi), leading zeros allowed.
std::string same_length(const std::string& lo, const std::string& hi) {
  if (lo.empty()) return "";
  if (lo == hi) return lo;
  if (lo[0] == hi[0]) return lo.substr(0, 1) + same_length(lo.substr(1), hi.substr(1));
  const size_t rest = lo.size() - 1;
  const std::string lo_rest = lo.substr(1), hi_rest = hi.substr(1);
  const bool lo_whole = lo_rest == std::string(rest, '0'), hi_whole = hi_rest == std::string(rest, '9');
  std::vector<std::string> parts;
  char middle_first = lo[0], middle_last = hi[0];
  if (!lo_whole) {  // lo's first digit with the rest from lo_rest up
    parts.push_back(lo.substr(0, 1) + same_length(lo_rest, std::string(rest, '9')));
    ++middle_first;
  }
  if (!hi_whole) --middle_last;
  if (middle_first <= middle_last) parts.push_back(digit_class(middle_first, middle_last) + any_digits(rest));
  if (!hi_whole) parts.push_back(hi.substr(0, 1) + same_length(std::string(rest, '0'), hi_rest));
  return alternation(parts);
}

uint64_t pow10(int digits) {
  uint64_t p = 1;
  for (int i = 0; i < digits; ++i) p *= 10;
  return p;
}

int digit_count(uint64_t v) {
  return static_cast<int>(std::to_string(v).size());
}

// Non-negative integers in [a, b] (b absent: unbounded), without leading zeros; empty when none.
std::string unsigned_range(uint64_t a, std::optional<uint64_t> b) {
  if (b && *b < a) return "";
  std::vector<std::string> parts;
  if (a == 0) {
    parts.push_back("0");
    if (b && *b == 0) return "0";
    a = 1;
  }
  const int first = digit_count(a), last = b ? digit_count(*b) : first;
  for (int d = first; d <= last; ++d) {
    const uint64_t lo = std::max(a, pow10(d - 1));
    const uint64_t top = d >= 20 ? UINT64_MAX : pow10(d) - 1;
    const uint64_t hi = b ? std::min(*b, top) : top;
    if (lo <= hi) parts.push_back(same_length(std::to_string(lo), std::to_string(hi)));
  }
  if (!b) parts.push_back("[1-9][0-9]{" + std::to_string(first) + ",}");  // more digits than a has
  return alternation(parts);
}

uint64_t magnitude(int64_t v) {
  return v < 0 ? uint64_t(0) - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
}

// No upper bound, for magnitude_range (magnitudes of int64 values are at most 2^63).
constexpr uint64_t kUnbounded = UINT64_MAX;

// Non-negative values m (integer part, optional fraction) with lo < m or lo <= m, and m < hi or m <= hi (hi
// kUnbounded: none); empty when none.
std::string magnitude_range(uint64_t lo, bool lo_exclusive, uint64_t hi, bool hi_exclusive) {
  const bool bounded = hi != kUnbounded;
  std::vector<std::string> parts;
  // Integer parts whose every fraction is inside: (lo or lo + 1) .. hi - 1.
  const uint64_t whole_first = lo_exclusive ? lo + 1 : lo;
  if (!bounded || hi >= 1) {
    const std::string whole =
        unsigned_range(whole_first, bounded ? std::optional<uint64_t>(hi - 1) : std::nullopt);
    if (!whole.empty()) parts.push_back(whole + std::string(kAnyFraction));
  }
  // lo itself excluded: lo with a fraction that is not all zeros, where lo + 1 <= hi.
  if (lo_exclusive && (!bounded || hi > lo))
    parts.push_back(std::to_string(lo) + std::string(kNonZeroFraction));
  // hi itself included: hi with no fraction or zeros only.
  if (bounded && !hi_exclusive && (hi > lo || (hi == lo && !lo_exclusive)))
    parts.push_back(std::to_string(hi) + std::string(kZeroFraction));
  return parts.empty() ? "" : alternation(parts);
}

}  // namespace

std::string json_integer_range_regex(std::optional<int64_t> lo, std::optional<int64_t> hi) {
  if (lo && hi && *lo > *hi)
    throw Error("no integer lies between " + std::to_string(*lo) + " and " + std::to_string(*hi));
  std::vector<std::string> parts;
  if (!lo || *lo < 0) {  // negatives: -m with |hi'| <= m <= |lo|, hi' = min(hi, -1)
    const int64_t top = hi ? std::min<int64_t>(*hi, -1) : -1;
    const std::string m =
        unsigned_range(magnitude(top), lo ? std::optional<uint64_t>(magnitude(*lo)) : std::nullopt);
    if (!m.empty()) parts.push_back("-" + m);
  }
  if (!hi || *hi >= 0) {
    const std::string m =
        unsigned_range(lo ? static_cast<uint64_t>(std::max<int64_t>(*lo, 0)) : 0,
                       hi ? std::optional<uint64_t>(static_cast<uint64_t>(*hi)) : std::nullopt);
    if (!m.empty()) parts.push_back(m);
  }
  return alternation(parts);
}

std::string json_number_range_regex(std::optional<NumberBound> lo, std::optional<NumberBound> hi) {
  std::vector<std::string> parts;
  // Negatives -m (m > 0): m up to |lo| where lo < 0, and from |hi| where hi < 0.
  if (!lo || lo->value < 0) {
    const bool hi_negative = hi && hi->value < 0;
    const uint64_t m_lo = hi_negative ? magnitude(hi->value) : 0;
    const bool m_lo_exclusive = hi_negative ? hi->exclusive : true;  // m > 0: -0 is not negative
    const uint64_t m_hi = lo ? magnitude(lo->value) : kUnbounded;
    const std::string m = magnitude_range(m_lo, m_lo_exclusive, m_hi, lo && lo->exclusive);
    if (!m.empty()) parts.push_back("-" + m);
  }
  // Zero and positives: m >= max(lo, 0).
  if (!hi || hi->value >= 0) {
    const bool lo_positive = lo && lo->value >= 0;
    const uint64_t m_lo = lo_positive ? static_cast<uint64_t>(lo->value) : 0;
    const bool m_lo_exclusive = lo_positive && lo->exclusive;
    const uint64_t m_hi = hi ? static_cast<uint64_t>(hi->value) : kUnbounded;
    const std::string m = magnitude_range(m_lo, m_lo_exclusive, m_hi, hi && hi->exclusive);
    if (!m.empty()) parts.push_back(m);
  }
  if (parts.empty()) {
    auto side = [](const std::optional<NumberBound>& b, const char* open, const char* closed) {
      return b ? std::string(b->exclusive ? open : closed) + std::to_string(b->value) : std::string("any");
    };
    throw Error("no number lies in the range " + side(lo, "> ", ">= ") + " and " + side(hi, "< ", "<= "));
  }
  return alternation(parts);
}

}  // namespace tpserve::serve
