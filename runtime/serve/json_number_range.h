// Regexes of JSON numbers within bounds, for JSON schemas' minimum / maximum / exclusiveMinimum /
// exclusiveMaximum (runtime/serve/json_schema_regex.cc). Integers of any 64-bit range, written as JSON writes
// them (no leading zeros, no "-0"); numbers with any decimal bounds (the magnitude's integer part within 64
// bits), written without an exponent (a bound on a number with an exponent is not a regular language worth
// building here) and never as "-0". The syntax is runtime/serve/regex_parser.h's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tpserve::serve {

// A decimal bound: (negative ? -1 : 1) x whole.fraction, fraction without trailing zeros (zero is not
// negative), and whether the value itself is excluded.
struct NumberBound {
  bool negative = false;
  uint64_t whole = 0;
  std::string fraction;
  bool exclusive = false;
};

// The bound written as `decimal` (JSON number syntax: sign, digits, fraction, exponent); std::nullopt where
// its integer part's magnitude exceeds 2^63 (or its exponent 400). Throws tpserve::Error on text that is
// not a number.
std::optional<NumberBound> parse_number_bound(std::string_view decimal, bool exclusive);

// The inclusive bound at the integer v.
NumberBound integer_number_bound(int64_t v);

// Integers n with lo <= n <= hi (a side absent: unbounded). Throws tpserve::Error when none is.
std::string json_integer_range_regex(std::optional<int64_t> lo, std::optional<int64_t> hi);

// Most digits after the point a bound of json_number_range_regex may have (1e-32 has 32; each digit nests two
// regex groups, beside the schema's own).
inline constexpr size_t kMaxBoundFractionDigits = 32;

// Numbers x (integer part, optional fraction, no exponent) with lo <= x (lo < x where exclusive) and
// x <= hi (x < hi). Throws tpserve::Error when none is, or where a bound has more than
// kMaxBoundFractionDigits digits after the point.
std::string json_number_range_regex(const std::optional<NumberBound>& lo,
                                    const std::optional<NumberBound>& hi);

}  // namespace tpserve::serve
