// Regexes of JSON numbers within bounds, for JSON schemas' minimum / maximum / exclusiveMinimum /
// exclusiveMaximum (runtime/serve/json_schema_regex.cc). Integers of any 64-bit range, written as JSON writes
// them (no leading zeros, no "-0"); numbers with integer bounds, written without an exponent (a bound on a
// number with an exponent is not a regular language worth building here). The syntax is
// runtime/serve/regex_parser.h's.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace tpserve::serve {

// One side of a range: a value and whether the value itself is excluded.
struct NumberBound {
  int64_t value = 0;
  bool exclusive = false;
};

// Integers n with lo <= n <= hi (a side absent: unbounded). Throws tpserve::Error when none is.
std::string json_integer_range_regex(std::optional<int64_t> lo, std::optional<int64_t> hi);

// Numbers x (integer part, optional fraction, no exponent) with lo <= x (lo < x where exclusive) and
// x <= hi (x < hi). Throws tpserve::Error when none is.
std::string json_number_range_regex(std::optional<NumberBound> lo, std::optional<NumberBound> hi);

}  // namespace tpserve::serve
