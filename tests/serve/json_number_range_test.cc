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
  const std::vector<std::string> fractions = {"",     ".0", ".00", ".5", ".05",  ".999",  ".001", ".25",
                                              ".250", ".2", ".75", ".7", ".701", ".0501", ".049", ".251",
                                              ".3",   ".1", ".15", ".4", ".45",  ".6",    ".8",   ".9"};
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

std::optional<NumberBound> bound(const std::string& text, bool exclusive) {
  return parse_number_bound(text, exclusive);
}

void expect_number_range(const std::string& lo_text, bool lo_exclusive, const std::string& hi_text,
                         bool hi_exclusive) {
  const std::optional<NumberBound> lo = lo_text.empty() ? std::nullopt : bound(lo_text, lo_exclusive);
  const std::optional<NumberBound> hi = hi_text.empty() ? std::nullopt : bound(hi_text, hi_exclusive);
  const long double l = lo_text.empty() ? 0 : std::stold(lo_text),
                    h = hi_text.empty() ? 0 : std::stold(hi_text);
  SCOPED_TRACE((lo ? (lo_exclusive ? "> " : ">= ") + lo_text : std::string("none")) + ", " +
               (hi ? (hi_exclusive ? "< " : "<= ") + hi_text : std::string("none")));
  const bool empty = lo && hi && (l > h || (l == h && (lo_exclusive || hi_exclusive)));
  if (empty) {
    EXPECT_THROW(json_number_range_regex(lo, hi), Error);
    return;
  }
  const std::string regex = json_number_range_regex(lo, hi);
  SCOPED_TRACE("regex " + regex);
  RegexDfa dfa(regex);
  int bad = 0;
  for (const auto& [text, x] : number_grid()) {
    const bool inside = (!lo || (lo_exclusive ? x > l : x >= l)) && (!hi || (hi_exclusive ? x < h : x <= h));
    if (dfa.matches(text) != inside && bad++ < 5) ADD_FAILURE() << text << " inside=" << inside;
  }
  for (const char* never : {"1e3", "1.", ".5", "01", "-0", "-0.0", "+1", ""})
    EXPECT_FALSE(dfa.matches(never)) << never;
}

TEST(JsonNumberRange, MatchesExactlyTheNumbersInside) {
  const std::vector<std::string> points = {"",     "-20",  "-7.5", "-7", "-1",   "-0.25", "-0.2", "0",
                                           "0.05", "0.25", "0.7",  "1",  "2.75", "3",     "12",   "12.0501"};
  for (const std::string& lo : points)
    for (const std::string& hi : points)
      for (int flags = 0; flags < 4; ++flags) expect_number_range(lo, flags & 1, hi, flags & 2);
}

TEST(JsonNumberRange, BoundsParseFromJsonNumbers) {
  const auto b = [](const char* text) { return *parse_number_bound(text, false); };
  EXPECT_EQ(b("12.50").whole, 12u);
  EXPECT_EQ(b("12.50").fraction, "5");
  EXPECT_EQ(b("-0.0").negative, false);
  EXPECT_EQ(b("1e-05").fraction, "00001");
  EXPECT_EQ(b("1.5e+3").whole, 1500u);
  EXPECT_EQ(b("2.5E2").fraction, "");
  EXPECT_EQ(b("-3.25e1").whole, 32u);
  EXPECT_EQ(b("-3.25e1").fraction, "5");
  EXPECT_TRUE(b("-3.25e1").negative);
  EXPECT_EQ(b("9223372036854775807").whole, 9223372036854775807u);
  EXPECT_EQ(b("-9223372036854775808").whole, 9223372036854775808u);
  EXPECT_FALSE(parse_number_bound("9223372036854775809", false));
  EXPECT_THROW(parse_number_bound("1e5.5", false), Error);
  EXPECT_FALSE(parse_number_bound("1e+30", false));
  EXPECT_THROW(parse_number_bound("abc", false), Error);
}

}  // namespace
}  // namespace tpserve::serve
