// Layout: panels of 520 x 380 px side by side under a title, the legend below; coordinates to 0.1 px.
#include "bench/common/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

#include "common/error.h"

namespace tpserve::bench {
namespace {

constexpr double kPanelWidth = 520, kPanelHeight = 380;
constexpr double kLeft = 72, kRight = 24, kTop = 44, kBottom = 56;  // plot-area margins inside a panel
constexpr double kTitleHeight = 36, kLegendHeight = 40;
const char* const kColours[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"};

std::string number(double v) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.4g", v);
  return text;
}

std::string coord(double v) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f", v);
  return text;
}

// Maps data values to pixels along one axis.
struct Axis {
  double lo = 0, hi = 1;    // data range (log2 of it for log axes)
  double from = 0, to = 1;  // pixels
  bool log2 = false;
  double operator()(double v) const {
    const double t = log2 ? std::log2(v) : v;
    return from + (t - lo) / (hi - lo) * (to - from);
  }
};

bool finite(double v) {
  return std::isfinite(v);
}

void draw_panel(std::ostringstream& os, const ChartPanel& panel, double x0, double y0,
                const std::map<std::string, std::string>& colour) {
  const double left = x0 + kLeft, right = x0 + kPanelWidth - kRight;
  const double top = y0 + kTop, bottom = y0 + kPanelHeight - kBottom;

  std::vector<double> xs, ys;
  for (const auto& s : panel.series) {
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (!finite(s.x[i]) || !finite(s.y[i]) || (panel.log2_x && s.x[i] <= 0)) continue;
      xs.push_back(s.x[i]);
      ys.push_back(s.y[i]);
      if (i < s.y_high.size() && finite(s.y_high[i])) ys.push_back(s.y_high[i]);
      if (i < s.y_low.size() && finite(s.y_low[i])) ys.push_back(s.y_low[i]);
    }
  }
  os << "<text x=\"" << coord((left + right) / 2) << "\" y=\"" << coord(y0 + 26)
     << "\" text-anchor=\"middle\" class=\"panel-title\">" << xml_escape(panel.title) << "</text>\n";
  os << "<rect x=\"" << coord(left) << "\" y=\"" << coord(top) << "\" width=\"" << coord(right - left)
     << "\" height=\"" << coord(bottom - top) << "\" class=\"frame\"/>\n";
  if (xs.empty()) {
    os << "<text x=\"" << coord((left + right) / 2) << "\" y=\"" << coord((top + bottom) / 2)
       << "\" text-anchor=\"middle\">no data</text>\n";
    return;
  }

  // x: log2 axes are ticked at the data's own x values; linear ones at round numbers.
  std::vector<double> x_ticks;
  Axis ax{.from = left + 12, .to = right - 12, .log2 = panel.log2_x};
  if (panel.log2_x) {
    x_ticks = xs;
    std::sort(x_ticks.begin(), x_ticks.end());
    x_ticks.erase(std::unique(x_ticks.begin(), x_ticks.end()), x_ticks.end());
    ax.lo = std::log2(x_ticks.front()), ax.hi = std::log2(x_ticks.back());
  } else {
    x_ticks = nice_ticks(*std::min_element(xs.begin(), xs.end()), *std::max_element(xs.begin(), xs.end()), 6);
    ax.lo = x_ticks.front(), ax.hi = x_ticks.back();
  }
  if (ax.hi <= ax.lo) ax.lo -= 1, ax.hi += 1;  // a single x value: centre it
  // y: from zero when every value is non-negative.
  double y_min = *std::min_element(ys.begin(), ys.end()), y_max = *std::max_element(ys.begin(), ys.end());
  if (y_min >= 0) y_min = 0;
  if (y_max <= y_min) y_max = y_min + 1;
  const std::vector<double> y_ticks = nice_ticks(y_min, y_max, 6);
  const Axis ay{.lo = y_ticks.front(), .hi = y_ticks.back(), .from = bottom, .to = top};

  for (double t : y_ticks) {
    const std::string y = coord(ay(t));
    os << "<line x1=\"" << coord(left) << "\" y1=\"" << y << "\" x2=\"" << coord(right) << "\" y2=\"" << y
       << "\" class=\"grid\"/>\n";
    os << "<text x=\"" << coord(left - 6) << "\" y=\"" << y << "\" dy=\"4\" text-anchor=\"end\">" << number(t)
       << "</text>\n";
  }
  for (double t : x_ticks) {
    const std::string x = coord(ax(t));
    os << "<line x1=\"" << x << "\" y1=\"" << coord(bottom) << "\" x2=\"" << x << "\" y2=\""
       << coord(bottom + 5) << "\" class=\"axis\"/>\n";
    os << "<text x=\"" << x << "\" y=\"" << coord(bottom + 19) << "\" text-anchor=\"middle\">" << number(t)
       << "</text>\n";
  }
  os << "<text x=\"" << coord((left + right) / 2) << "\" y=\"" << coord(bottom + 42)
     << "\" text-anchor=\"middle\" class=\"label\">" << xml_escape(panel.x_label) << "</text>\n";
  const std::string yl_x = coord(x0 + 18), yl_y = coord((top + bottom) / 2);
  os << "<text x=\"" << yl_x << "\" y=\"" << yl_y << "\" transform=\"rotate(-90 " << yl_x << " " << yl_y
     << ")\" text-anchor=\"middle\" class=\"label\">" << xml_escape(panel.y_label) << "</text>\n";

  for (size_t k = 0; k < panel.series.size(); ++k) {
    const ChartSeries& s = panel.series[k];
    const std::string& c = colour.at(s.name);
    // Whiskers of different series at one x are spread a little so that they stay apart.
    const double spread = 4.0 * (static_cast<double>(k) - 0.5 * static_cast<double>(panel.series.size() - 1));
    std::string points;
    auto flush = [&] {
      if (!points.empty())
        os << "<polyline points=\"" << points << "\" fill=\"none\" stroke=\"" << c
           << "\" stroke-width=\"2\"/>\n";
      points.clear();
    };
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (!finite(s.x[i]) || !finite(s.y[i]) || (panel.log2_x && s.x[i] <= 0)) {
        flush();
        continue;
      }
      points += (points.empty() ? "" : " ") + coord(ax(s.x[i])) + "," + coord(ay(s.y[i]));
    }
    flush();
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (!finite(s.x[i]) || !finite(s.y[i]) || (panel.log2_x && s.x[i] <= 0)) continue;
      const std::string x = coord(ax(s.x[i])), xw = coord(ax(s.x[i]) + spread);
      if (i < s.y_low.size() && i < s.y_high.size() && finite(s.y_low[i]) && finite(s.y_high[i]))
        os << "<line x1=\"" << xw << "\" y1=\"" << coord(ay(s.y_low[i])) << "\" x2=\"" << xw << "\" y2=\""
           << coord(ay(s.y_high[i])) << "\" stroke=\"" << c << "\" stroke-width=\"1\"/>\n";
      os << "<circle cx=\"" << x << "\" cy=\"" << coord(ay(s.y[i])) << "\" r=\"3\" fill=\"" << c << "\"/>\n";
    }
  }
}

}  // namespace

std::vector<double> nice_ticks(double lo, double hi, int target) {
  TPS_CHECK(std::isfinite(lo) && std::isfinite(hi) && lo <= hi && target >= 1, "nice_ticks(", lo, ", ", hi,
            ", ", target, ")");
  if (hi == lo) hi = lo + 1;
  const double raw = (hi - lo) / target;
  const int exponent = static_cast<int>(std::floor(std::log10(raw)));
  // Ticks are integers times 10^exponent; dividing by 10^-exponent keeps 0.6 from becoming
  // 0.6000000000000001.
  const double scale = std::pow(10.0, std::abs(exponent));
  auto value = [&](double units) { return exponent >= 0 ? units * scale : units / scale; };
  double multiple = 10;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (value(m) >= raw) {
      multiple = m;
      break;
    }
  const double step = value(multiple);
  std::vector<double> ticks;
  for (double k = std::floor(lo / step + 1e-9); ticks.empty() || ticks.back() < hi - step * 1e-9; ++k)
    ticks.push_back(value(k * multiple) + 0.0);  // + 0.0: no negative zero
  return ticks;
}

std::string xml_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string render_svg(const std::string& title, const std::vector<ChartPanel>& panels) {
  std::map<std::string, std::string> colour;
  std::vector<std::string> names;
  for (const auto& p : panels)
    for (const auto& s : p.series)
      if (colour.emplace(s.name, kColours[names.size() % std::size(kColours)]).second)
        names.push_back(s.name);

  const double width = kPanelWidth * static_cast<double>(std::max<size_t>(panels.size(), 1));
  const double height = kTitleHeight + kPanelHeight + kLegendHeight;
  std::ostringstream os;
  os << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << coord(width) << "\" height=\""
     << coord(height) << "\" viewBox=\"0 0 " << coord(width) << " " << coord(height) << "\">\n";
  os << "<style>text{font-family:sans-serif;font-size:12px;fill:#222}.title{font-size:16px;font-weight:bold}"
        ".panel-title{font-size:14px}.label{font-size:13px}.frame{fill:none;stroke:#444}"
        ".grid{stroke:#ddd}.axis{stroke:#444}</style>\n";
  os << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  os << "<text x=\"" << coord(width / 2) << "\" y=\"24\" text-anchor=\"middle\" class=\"title\">"
     << xml_escape(title) << "</text>\n";
  for (size_t i = 0; i < panels.size(); ++i) draw_panel(os, panels[i], kPanelWidth * i, kTitleHeight, colour);

  // Legend: one entry per series name, left to right under the panels.
  double x = kLeft;
  const double y = kTitleHeight + kPanelHeight + 20;
  for (const auto& name : names) {
    os << "<line x1=\"" << coord(x) << "\" y1=\"" << coord(y) << "\" x2=\"" << coord(x + 24) << "\" y2=\""
       << coord(y) << "\" stroke=\"" << colour[name] << "\" stroke-width=\"3\"/>\n";
    os << "<text x=\"" << coord(x + 30) << "\" y=\"" << coord(y + 4) << "\">" << xml_escape(name)
       << "</text>\n";
    x += 46 + 7.5 * static_cast<double>(name.size());
  }
  os << "</svg>\n";
  return os.str();
}

}  // namespace tpserve::bench
