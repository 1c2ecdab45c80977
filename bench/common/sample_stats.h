// Statistics over benchmark samples: percentiles (linear interpolation between closest ranks, as numpy's
// default), a distribution summary, and the paired-difference statistic of A/B rounds: the median of the
// per-round differences B - A and the share of rounds whose difference has the sign of that median.
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

namespace tpserve::bench {

// q in [0, 100]; NaN for no samples.
double percentile(std::vector<double> values, double q);
double median(std::vector<double> values);
double mean(const std::vector<double>& values);  // NaN for no samples

struct Distribution {
  int count = 0;
  double mean = 0, median = 0, p10 = 0, p90 = 0, p99 = 0, min = 0, max = 0;  // NaN when count is 0
};
Distribution summarize(const std::vector<double>& values);
nlohmann::json to_json(const Distribution& d);

struct PairedDifference {
  int rounds = 0;       // pairs with both values present
  double median = 0;    // median of b[i] - a[i]; NaN without pairs
  double a_median = 0;  // median of a, for the relative change
  int sign_held = 0;    // rounds whose difference has the median's sign (0 when the median is 0)
  double relative() const { return median / a_median; }  // median difference over the median of a
  double sign_held_share() const { return rounds ? static_cast<double>(sign_held) / rounds : 0.0; }
};
// a[i] and b[i] are one round's values of two arms; NaN entries (a round without samples) are skipped.
PairedDifference paired_difference(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace tpserve::bench
