// json_number_range: the regexes of bounded integers and numbers accept exactly the values inside the bounds,
// checked against the arithmetic over every integer of a window (and around 64-bit extremes), and over a grid
// of decimal numbers; empty ranges are refused.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "common/error.h"
#include "runtime/serve/json_number_range.h"
#include "runtime/serve/regex_dfa.h"

namespace tpserve::serve {
namespace {

using Opt = std::optional<int64_t>;

void expect_integer_range(Opt lo, Opt hi, const std::vector<int64_t>& extra = {}) {
  const std::string regex = json_integer_range_regex(lo, hi);
  SCOPED_TRACE("[" + (lo ? std::to_string(*lo) : "-inf") + ", " + (hi ? std::to_string(*hi) : "inf") +
               "] regex " + regex);
  RegexDfa dfa(regex);
  std::vector<int64_t> values = extra;
  for (int64_t n = -1200; n <= 1200; ++n) values.push_back(n);
  int bad = 0;
  for (int64_t n : values) {
    const bool inside = (!lo || n >= *lo) && (!hi || n <= *hi);
    if (dfa.matches(std::to_string(n)) != inside && bad++ < 5) ADD_FAILURE() << n << " inside=" << inside;
  }
  for (const char* never : {"-0", "01", "-01", "00", "", "-", "1.0", "1e3", "+1"})
    EXPECT_FALSE(dfa.matches(never)) << never;
}

TEST(JsonIntegerRange, MatchesExactlyTheIntegersInside) {
  const std::vector<std::pair<Opt, Opt>> ranges = {{0, 0},
                                                   {0, 9},
                                                   {1, 5},
                                                   {3, 3},
                                                   {7, 10},
                                                   {9, 100},
                                                   {10, 99},
                                                   {15, 1000},
                                                   {123, 987},
                                                   {100, 100},
                                                   {99, 101},
                                                   {-5, 5},
                                                   {-10, -1},
                                                   {-1, -1},
                                                   {-999, 0},
                                                   {-123, 45},
                                                   {-1000, -100},
                                                   {0, std::nullopt},
                                                   {1, std::nullopt},
                                                   {17, std::nullopt},
                                                   {-17, std::nullopt},
                                                   {-1000, std::nullopt},
                                                   {std::nullopt, 0},
                                                   {std::nullopt, -1},
                                                   {std::nullopt, 250},
                                                   {std::nullopt, -250},
                                                   {std::nullopt, std::nullopt}};
  for (const auto& [lo, hi] : ranges) expect_integer_range(lo, hi);
}

TEST(JsonIntegerRange, SixtyFourBitExtremes) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max(), kMin = std::numeric_limits<int64_t>::min();
  const std::vector<int64_t> extremes = {kMax,         kMax - 1,      kMin,          kMin + 1,
                                         999999999999, 1000000000000, -999999999999, -1000000000000,
                                         4294967295,   4294967296,    -4294967296};
  expect_integer_range(kMin, kMax, extremes);
  expect_integer_range(0, kMax, extremes);
  expect_integer_range(kMin, -1, extremes);
  expect_integer_range(4294967295, 1000000000000, extremes);
  expect_integer_range(-1000000000000, -999999999999, extremes);
  RegexDfa top(json_integer_range_regex(0, kMax));
  EXPECT_FALSE(top.matches("9223372036854775808"));
  EXPECT_FALSE(top.matches("10000000000000000000"));
  RegexDfa bottom(json_integer_range_regex(kMin, 0));
  EXPECT_TRUE(bottom.matches("-9223372036854775808"));
  EXPECT_FALSE(bottom.matches("-9223372036854775809"));
}

TEST(JsonIntegerRange, AnEmptyRangeIsRefused) {
  EXPECT_THROW(json_integer_range_regex(5, 4), Error);
  EXPECT_THROW(json_integer_range_regex(0, -1), Error);
}

// Decimal texts of a grid: integer parts -25..25 with fractions of every kind; "-0" forms left out (they
// equal 0 and are not written).
std::vector<std::pair<std::string, long double>> number_grid() {
  std::vector<std::pair<std::string, long double>> out;
  const std::vector<std::string> fractions = {"", ".0", ".00", ".5", ".05", ".999", ".001"};
  for (int i = -25; i <= 25; ++i)
    for (const std::string& f : fractions) {
      const std::string magnitude = std::to_string(std::abs(i)) + f;
      const long double m = std::stold(magnitude);
      if (i < 0) {
        out.push_back({"-" + magnitude, -m});
      } else {
        out.push_back({magnitude, m});
        if (i == 0 && m != 0) out.push_back({"-" + magnitude, -m});
      }
    }
  return out;
}

void expect_number_range(std::optional<NumberBound> lo, std::optional<NumberBound> hi) {
  const std::string regex = json_number_range_regex(lo, hi);
  auto side = [](const std::optional<NumberBound>& b, const char* open, const char* closed) {
    return b ? (b->exclusive ? open : closed) + std::to_string(b->value) : std::string("none");
  };
  SCOPED_TRACE(side(lo, "> ", ">= ") + ", " + side(hi, "< ", "<= ") + " regex " + regex);
  RegexDfa dfa(regex);
  int bad = 0;
  for (const auto& [text, x] : number_grid()) {
    const bool inside = (!lo || (lo->exclusive ? x > lo->value : x >= lo->value)) &&
                        (!hi || (hi->exclusive ? x < hi->value : x <= hi->value));
    if (dfa.matches(text) != inside && bad++ < 5) ADD_FAILURE() << text << " inside=" << inside;
  }
  for (const char* never : {"1e3", "1.", ".5", "01", "-0", "-0.0", "+1", ""})
    EXPECT_FALSE(dfa.matches(never)) << never;
}

TEST(JsonNumberRange, MatchesExactlyTheNumbersInside) {
  using B = std::optional<NumberBound>;
  const std::vector<int64_t> points = {-20, -7, -1, 0, 1, 3, 12};
  std::vector<B> bounds = {std::nullopt};
  for (int64_t v : points) bounds.push_back(NumberBound{v, false}), bounds.push_back(NumberBound{v, true});
  for (const B& lo : bounds)
    for (const B& hi : bounds) {
      const bool empty =
          lo && hi && (lo->value > hi->value || (lo->value == hi->value && (lo->exclusive || hi->exclusive)));
      if (empty) {
        EXPECT_THROW(json_number_range_regex(lo, hi), Error);
      } else {
        expect_number_range(lo, hi);
      }
    }
}

}  // namespace
}  // namespace tpserve::serve
