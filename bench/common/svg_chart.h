// SvgChart: line charts as a standalone SVG document written by hand (no plotting dependency): one or more
// panels side by side, each with axes, ticks, tick labels, axis labels and a title, one line (with point
// markers and optional low-high whiskers) per series, and one legend for the figure.
#pragma once

#include <string>
#include <vector>

namespace tpserve::bench {

struct ChartSeries {
  std::string name;
  std::vector<double> x;
  std::vector<double> y;      // NaN: no point (the line breaks there)
  std::vector<double> y_low;  // optional whiskers (empty, or one per point)
  std::vector<double> y_high;
};

struct ChartPanel {
  std::string title;
  std::string x_label;
  std::string y_label;
  bool log2_x = false;  // x on a log2 scale, ticked at the data's x values (concurrency 1, 2, 4, ...)
  std::vector<ChartSeries> series;
};

// The whole document. Series of the same name share a colour across panels; the legend lists each name once.
std::string render_svg(const std::string& title, const std::vector<ChartPanel>& panels);

// About `target` round ticks (1, 2 or 5 times a power of ten apart) covering [lo, hi], ascending.
std::vector<double> nice_ticks(double lo, double hi, int target);
// Text safe inside XML elements and attributes.
std::string xml_escape(const std::string& text);

}  // namespace tpserve::bench
