// The hand-written SVG: well-formed enough for a browser (one root, balanced elements, escaped text), one
// line per series and panel, a legend entry per name, ticks at round numbers and at the concurrency levels.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <regex>

#include "bench/common/svg_chart.h"

namespace tpserve::bench {
namespace {

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(SvgChart, NiceTicksAreRoundAndCoverTheRange) {
  EXPECT_EQ(nice_ticks(0, 9.3, 5), (std::vector<double>{0, 2, 4, 6, 8, 10}));
  EXPECT_EQ(nice_ticks(0, 1, 5), (std::vector<double>{0, 0.2, 0.4, 0.6, 0.8, 1}));
  const auto t = nice_ticks(13, 87, 6);
  EXPECT_LE(t.front(), 13);
  EXPECT_GE(t.back(), 87);
  EXPECT_DOUBLE_EQ(t[1] - t[0], 20);      // 74 / 6 = 12.3 rounds up to 20
  const auto flat = nice_ticks(5, 5, 4);  // an empty range still gets an axis
  EXPECT_GE(flat.size(), 2u);
  EXPECT_LE(flat.front(), 5);
  EXPECT_GT(flat.back(), 5);
}

TEST(SvgChart, EscapesText) {
  EXPECT_EQ(xml_escape("a<b & \"c\"'"), "a&lt;b &amp; &quot;c&quot;&apos;");
}

TEST(SvgChart, DocumentHasPanelsLinesTicksAndLegend) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  ChartPanel left{
      .title = "tok/s", .x_label = "concurrency", .y_label = "tok/s", .log2_x = true, .series = {}};
  left.series.push_back(
      {.name = "pdl<on>", .x = {1, 2, 4, 8}, .y = {100, 90, 70, 50}, .y_low = {}, .y_high = {}});
  left.series.push_back(
      {.name = "off", .x = {1, 2, 4, 8}, .y = {95, nan, 65, 45}, .y_low = {}, .y_high = {}});
  ChartPanel right = left;
  right.title = "step ms";
  right.series[0].y_low = {1, 1, 1, 1};
  right.series[0].y_high = {200, 200, 200, 200};
  const std::string svg = render_svg("title & more", {left, right});

  EXPECT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u);
  EXPECT_EQ(svg.substr(svg.size() - 7), "</svg>\n");
  EXPECT_EQ(count(svg, "<svg"), 1);
  EXPECT_EQ(count(svg, "<text"), count(svg, "</text>"));
  EXPECT_NE(svg.find("title &amp; more"), std::string::npos);
  EXPECT_NE(svg.find("pdl&lt;on&gt;"), std::string::npos);
  EXPECT_EQ(svg.find("pdl<on>"), std::string::npos);
  // Per panel: one line for "pdl<on>", two pieces for "off" (broken at the NaN) = 3; 6 in all.
  EXPECT_EQ(count(svg, "<polyline"), 6);
  EXPECT_EQ(count(svg, "<circle"), 2 * (4 + 3));
  for (const char* tick : {">1</text>", ">2</text>", ">4</text>", ">8</text>"})
    EXPECT_GE(count(svg, tick), 2) << tick;
  // Whiskers (4 points) in the right panel, legend lines (2): stroke-width 1 and 3.
  EXPECT_EQ(count(svg, "stroke-width=\"1\""), 4);
  EXPECT_EQ(count(svg, "stroke-width=\"3\""), 2);
  // Every coordinate is a finite number.
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  EXPECT_EQ(svg.find("inf"), std::string::npos);
}

TEST(SvgChart, EmptyPanelSaysSo) {
  const std::string svg =
      render_svg("t", {ChartPanel{.title = "p", .x_label = "x", .y_label = "y", .series = {}}});
  EXPECT_NE(svg.find("no data"), std::string::npos);
}

}  // namespace
}  // namespace tpserve::bench
