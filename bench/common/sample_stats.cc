// Percentiles sort a copy of the samples; paired differences skip rounds where either side is NaN.
#include "bench/common/sample_stats.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/error.h"

namespace tpserve::bench {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

}  // namespace

double percentile(std::vector<double> values, double q) {
  TPS_CHECK(q >= 0.0 && q <= 100.0, "percentile ", q, " outside [0, 100]");
  if (values.empty()) return kNaN;
  std::sort(values.begin(), values.end());
  const double rank = q / 100.0 * static_cast<double>(values.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, values.size() - 1);
  return values[lo] + (rank - static_cast<double>(lo)) * (values[hi] - values[lo]);
}

double median(std::vector<double> values) {
  return percentile(std::move(values), 50.0);
}

double mean(const std::vector<double>& values) {
  if (values.empty()) return kNaN;
  double sum = 0;
  for (double v : values) sum += v;
  return sum / static_cast<double>(values.size());
}

Distribution summarize(const std::vector<double>& values) {
  Distribution d;
  d.count = static_cast<int>(values.size());
  d.mean = mean(values);
  d.median = percentile(values, 50), d.p10 = percentile(values, 10), d.p90 = percentile(values, 90);
  d.p99 = percentile(values, 99), d.min = percentile(values, 0), d.max = percentile(values, 100);
  return d;
}

nlohmann::json to_json(const Distribution& d) {
  return {{"count", d.count}, {"mean", d.mean}, {"median", d.median}, {"p10", d.p10},
          {"p90", d.p90},     {"p99", d.p99},   {"min", d.min},       {"max", d.max}};
}

PairedDifference paired_difference(const std::vector<double>& a, const std::vector<double>& b) {
  TPS_CHECK(a.size() == b.size(), "paired difference of ", a.size(), " and ", b.size(), " rounds");
  std::vector<double> diffs, firsts;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) || std::isnan(b[i])) continue;
    diffs.push_back(b[i] - a[i]);
    firsts.push_back(a[i]);
  }
  PairedDifference p;
  p.rounds = static_cast<int>(diffs.size());
  p.median = median(diffs);
  p.a_median = median(firsts);
  for (double d : diffs)
    if ((p.median > 0 && d > 0) || (p.median < 0 && d < 0)) ++p.sign_held;
  return p;
}

}  // namespace tpserve::bench
