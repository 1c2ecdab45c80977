// tp_decode's outputs: the console table (per arm and concurrency, then the paired differences), the
// summary as CSV, everything as JSON (build identity, machine, date, options, each arm's resolved config,
// every raw step and request sample, the summary), and the plot (SVG: per-request decode tok/s and decode
// step time against concurrency, one line per arm).
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "bench/tp_decode/sweep_summary.h"

namespace tpserve::bench {

std::string format_summary_table(const SweepSummary& summary);
std::string summary_csv(const SweepSummary& summary);
nlohmann::json sweep_json(const SweepOptions& options, const SweepResult& result, const SweepSummary& summary,
                          const std::vector<std::string>& command_line);
std::string sweep_plot_svg(const SweepSummary& summary, const std::string& title);

// "12.3" with `decimals` digits, or "n/a" for NaN.
std::string format_or_na(double value, int decimals);

}  // namespace tpserve::bench
