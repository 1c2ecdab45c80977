// Per-mode summaries of one case; differences are paired by round (bench/common/sample_stats.h).
#include "bench/op_chain/chain_summary.h"

#include <cmath>
#include <limits>

namespace tpserve::bench {

double us_per_edge(double delta_us, int extra_edges) {
  if (extra_edges == 0 || std::isnan(delta_us)) return std::numeric_limits<double>::quiet_NaN();
  return delta_us / extra_edges;
}

std::array<ModeSummary, kNumLaunchModes> summarize_case(const CaseRun& run) {
  const ModeRun& base = run.modes[static_cast<int>(kBaselineMode)];
  std::array<ModeSummary, kNumLaunchModes> out;
  for (LaunchMode mode : kLaunchModes) {
    const ModeRun& m = run.modes[static_cast<int>(mode)];
    ModeSummary& s = out[static_cast<int>(mode)];
    s.mode = mode;
    s.replay = summarize(m.replay_us);
    s.eager = summarize(m.eager_us);
    s.programmatic_edges = m.graph.programmatic_edges;
    s.extra_edges = m.graph.programmatic_edges - base.graph.programmatic_edges;
    s.replay_vs_base = paired_difference(base.replay_us, m.replay_us);
    s.eager_vs_base = paired_difference(base.eager_us, m.eager_us);
    s.replay_us_per_edge = us_per_edge(s.replay_vs_base.median, s.extra_edges);
    s.eager_us_per_edge = us_per_edge(s.eager_vs_base.median, s.extra_edges);
  }
  return out;
}

}  // namespace tpserve::bench
