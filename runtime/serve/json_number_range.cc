#include "runtime/serve/json_number_range.h"

#include <algorithm>
#include <vector>

#include "common/error.h"
#include "runtime/serve/json_value_regex.h"

namespace tpserve::serve {
namespace {

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
  return regex_alternation(parts);
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
    const uint64_t hi = b ? std::min(*b, pow10(d) - 1) : pow10(d) - 1;  // d <= 19: magnitudes up to 2^63
    if (lo <= hi) parts.push_back(same_length(std::to_string(lo), std::to_string(hi)));
  }
  if (!b) parts.push_back("[1-9][0-9]{" + std::to_string(first) + ",}");  // more digits than a has
  return regex_alternation(parts);
}

uint64_t magnitude(int64_t v) {
  return v < 0 ? uint64_t(0) - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
}

// Fraction digit strings F (what follows the point; none = no fraction part, as zeros) meeting a condition:
// `some` the regex of the non-empty ones ("" where none qualifies), `none` whether no fraction qualifies.
struct Fraction {
  std::string some;
  bool none = false;
};

const Fraction kAnyFraction{"[0-9]+", true};

// Non-empty strings: `first` (a digit or class) followed by a rest meeting `rest`.
std::string starting(const std::string& first, const Fraction& rest) {
  if (rest.some.empty()) return rest.none ? first : "";
  return first + regex_group(rest.some) + (rest.none ? "?" : "");
}

Fraction join(const std::vector<std::string>& parts, bool none) {
  return {regex_alternation(parts), none};
}

std::string rest_of(const std::string& d) {
  return d.empty() ? "" : d.substr(1);
}

// F >= D (strict: F > D), D's digits padded with zeros.
Fraction fraction_above(const std::string& d, bool strict) {
  if (d.empty()) return strict ? Fraction{"[0-9]*[1-9][0-9]*", false} : kAnyFraction;
  std::vector<std::string> parts;
  if (d[0] < '9') parts.push_back(digit_class(static_cast<char>(d[0] + 1), '9') + "[0-9]*");
  parts.push_back(starting(d.substr(0, 1), fraction_above(rest_of(d), strict)));
  return join(parts, false);  // no fraction is 0, below a non-empty (non-zero) D
}

// F <= D (strict: F < D).
Fraction fraction_below(const std::string& d, bool strict) {
  if (d.empty()) return strict ? Fraction{"", false} : Fraction{"0+", true};
  std::vector<std::string> parts;
  if (d[0] > '0') parts.push_back(digit_class('0', static_cast<char>(d[0] - 1)) + "[0-9]*");
  parts.push_back(starting(d.substr(0, 1), fraction_below(rest_of(d), strict)));
  return join(parts, true);  // no fraction is 0, below a non-empty D
}

// lo <= F <= hi (either strict), lo <= hi as fractions.
Fraction fraction_between(const std::string& lo, bool lo_strict, const std::string& hi, bool hi_strict) {
  if (hi.empty()) return lo.empty() && !lo_strict && !hi_strict ? Fraction{"0+", true} : Fraction{"", false};
  const char l = lo.empty() ? '0' : lo[0], h = hi[0];
  const bool none = lo.empty() && !lo_strict;  // 0 is below a non-empty hi
  if (l == h)
    return join(
        {starting(std::string(1, l), fraction_between(rest_of(lo), lo_strict, rest_of(hi), hi_strict))},
        none);
  std::vector<std::string> parts = {starting(std::string(1, l), fraction_above(rest_of(lo), lo_strict))};
  if (l + 1 <= h - 1)
    parts.push_back(digit_class(static_cast<char>(l + 1), static_cast<char>(h - 1)) + "[0-9]*");
  parts.push_back(starting(std::string(1, h), fraction_below(rest_of(hi), hi_strict)));
  return join(parts, none);
}

// The integer part `whole` followed by a fraction meeting f; "" where none does.
std::string with_fraction(const std::string& whole, const Fraction& f) {
  if (whole.empty()) return "";
  if (f.some.empty()) return f.none ? whole : "";
  return whole + "(?:\\." + regex_group(f.some) + ")" + (f.none ? "?" : "");
}

// A non-negative magnitude m = whole.fraction.
struct Magnitude {
  uint64_t whole = 0;
  std::string fraction;
};

// a < b, comparing whole then fraction digits (padded with zeros).
bool less(const Magnitude& a, const Magnitude& b) {
  if (a.whole != b.whole) return a.whole < b.whole;
  return a.fraction < b.fraction;  // normalized digit strings: lexicographic is numeric
}

// Magnitudes m (integer part, optional fraction) with lo < m or lo <= m, and m < hi or m <= hi (hi absent:
// unbounded); empty when none.
std::string magnitude_range(const Magnitude& lo, bool lo_exclusive, const std::optional<Magnitude>& hi,
                            bool hi_exclusive) {
  if (hi && less(*hi, lo)) return "";
  std::vector<std::string> parts;
  const std::string lo_whole = std::to_string(lo.whole);
  if (!hi || hi->whole > lo.whole) {
    // Integer parts strictly between: every fraction.
    if (!hi || hi->whole - lo.whole >= 2) {
      const std::string middle =
          unsigned_range(lo.whole + 1, hi ? std::optional<uint64_t>(hi->whole - 1) : std::nullopt);
      parts.push_back(with_fraction(middle.empty() ? "" : regex_group(middle), kAnyFraction));
    }
    parts.push_back(with_fraction(lo_whole, fraction_above(lo.fraction, lo_exclusive)));
    if (hi)
      parts.push_back(with_fraction(std::to_string(hi->whole), fraction_below(hi->fraction, hi_exclusive)));
  } else if (hi->whole == lo.whole) {
    parts.push_back(
        with_fraction(lo_whole, fraction_between(lo.fraction, lo_exclusive, hi->fraction, hi_exclusive)));
  }
  return regex_alternation(parts);
}

Magnitude magnitude_of(const NumberBound& b) {
  return {b.whole, b.fraction};
}

bool is_zero(const NumberBound& b) {
  return b.whole == 0 && b.fraction.empty();
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
  return regex_alternation(parts);
}

std::optional<NumberBound> parse_number_bound(std::string_view decimal, bool exclusive) {
  NumberBound b;
  b.exclusive = exclusive;
  size_t at = 0;
  const bool negative = !decimal.empty() && decimal[0] == '-';
  if (negative || (!decimal.empty() && decimal[0] == '+')) ++at;
  std::string digits;  // every mantissa digit; point: how many of them are before the decimal point
  int64_t point = -1;
  for (; at < decimal.size() && decimal[at] != 'e' && decimal[at] != 'E'; ++at) {
    if (decimal[at] == '.') {
      point = static_cast<int64_t>(digits.size());
    } else {
      if (decimal[at] < '0' || decimal[at] > '9') throw Error("not a number: " + std::string(decimal));
      digits += decimal[at];
    }
  }
  if (digits.empty()) throw Error("not a number: " + std::string(decimal));
  if (point < 0) point = static_cast<int64_t>(digits.size());
  if (at < decimal.size()) {  // exponent
    const std::string exponent(decimal.substr(at + 1));
    char* end = nullptr;
    const long long e = std::strtoll(exponent.c_str(), &end, 10);
    if (exponent.empty() || *end != '\0') throw Error("not a number: " + std::string(decimal));
    if (e > 400 || e < -400) return std::nullopt;
    point += e;
  }
  // digits[0 .. point) the whole part, the rest the fraction (zeros added where point is outside).
  std::string whole, fraction;
  if (point <= 0) {
    fraction = std::string(static_cast<size_t>(-point), '0') + digits;
  } else if (point >= static_cast<int64_t>(digits.size())) {
    whole = digits + std::string(static_cast<size_t>(point) - digits.size(), '0');
  } else {
    whole = digits.substr(0, static_cast<size_t>(point));
    fraction = digits.substr(static_cast<size_t>(point));
  }
  whole.erase(0, std::min(whole.find_first_not_of('0'), whole.size()));
  while (!fraction.empty() && fraction.back() == '0') fraction.pop_back();
  // At most 2^63: the magnitude of the smallest 64-bit integer (and whole + 1 cannot overflow).
  if (whole.size() > 19 || (whole.size() == 19 && whole > "9223372036854775808")) return std::nullopt;
  b.whole = whole.empty() ? 0 : std::stoull(whole);
  b.fraction = fraction;
  b.negative = negative && !is_zero(b);
  return b;
}

std::string json_number_range_regex(const std::optional<NumberBound>& lo,
                                    const std::optional<NumberBound>& hi) {
  // Each fraction digit nests two groups in the regex (runtime/serve/regex_parser.cc allows 200).
  for (const std::optional<NumberBound>& b : {lo, hi})
    if (b && b->fraction.size() > kMaxBoundFractionDigits)
      throw Error("a bound with more than " + std::to_string(kMaxBoundFractionDigits) +
                  " digits after the decimal point is not supported");
  std::vector<std::string> parts;
  // Negatives -m (m > 0): m up to |lo| where lo < 0, and from |hi| where hi < 0.
  if (!lo || lo->negative) {
    const bool hi_negative = hi && hi->negative;
    const Magnitude m_lo = hi_negative ? magnitude_of(*hi) : Magnitude{};
    const bool m_lo_exclusive = hi_negative ? hi->exclusive : true;  // m > 0: -0 is not written
    const std::optional<Magnitude> m_hi = lo ? std::optional<Magnitude>(magnitude_of(*lo)) : std::nullopt;
    const std::string m = magnitude_range(m_lo, m_lo_exclusive, m_hi, lo && lo->exclusive);
    if (!m.empty()) parts.push_back("-" + m);
  }
  // Zero and positives: m >= max(lo, 0).
  if (!hi || !hi->negative) {
    const bool lo_positive = lo && !lo->negative;
    const Magnitude m_lo = lo_positive ? magnitude_of(*lo) : Magnitude{};
    const bool m_lo_exclusive = lo_positive && lo->exclusive;
    const std::optional<Magnitude> m_hi = hi ? std::optional<Magnitude>(magnitude_of(*hi)) : std::nullopt;
    parts.push_back(magnitude_range(m_lo, m_lo_exclusive, m_hi, hi && hi->exclusive));
  }
  const std::string regex = regex_alternation(parts);
  if (regex.empty()) {
    auto side = [](const std::optional<NumberBound>& b, const char* open, const char* closed) {
      if (!b) return std::string("any");
      return std::string(b->exclusive ? open : closed) + (b->negative ? "-" : "") + std::to_string(b->whole) +
             (b->fraction.empty() ? "" : "." + b->fraction);
    };
    throw Error("no number lies in the range " + side(lo, "> ", ">= ") + " and " + side(hi, "< ", "<= "));
  }
  return regex;
}

NumberBound integer_number_bound(int64_t v) {
  return {v < 0, magnitude(v), "", false};
}

}  // namespace tpserve::serve
