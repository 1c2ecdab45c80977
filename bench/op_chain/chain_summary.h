// op_chain's raw results (per case and launch mode: the captured graph's counts, one timing per round) and
// their summary: distributions over rounds, the paired difference of each mode against the baseline mode
// (LaunchKernelEx without attribute) round by round, and that difference per extra programmatic edge.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "bench/common/sample_stats.h"
#include "bench/op_chain/chain_options.h"
#include "runtime/backend/backend.h"

namespace tpserve::bench {

struct ModeRun {
  GraphReport graph;              // the captured chain of this mode (nodes, edges, programmatic edges)
  std::vector<double> replay_us;  // per round: mean microseconds per graph replay
  std::vector<double> eager_us;   // per round: mean microseconds per chain launched eagerly
};

// One (shape, tokens) case: every mode, every round.
struct CaseRun {
  ChainShape shape;
  int tokens = 0;
  std::string router_gemm;                     // "gemv" or "cublaslt": what CudaBackend::linear ran
  std::array<ModeRun, kNumLaunchModes> modes;  // indexed by LaunchMode
  std::vector<std::vector<int>> order;         // per round, the modes in the order they ran
  bool outputs_match = false;                  // every mode's last hidden state equal to chevron's eager one
};

struct ModeSummary {
  LaunchMode mode = LaunchMode::kChevron;
  Distribution replay, eager;  // over rounds
  int programmatic_edges = 0;
  int extra_edges = 0;              // programmatic edges minus the baseline mode's
  PairedDifference replay_vs_base;  // per round: this mode minus the baseline mode
  PairedDifference eager_vs_base;
  double replay_us_per_edge = 0;  // replay_vs_base.median / extra_edges; NaN without extra edges
  double eager_us_per_edge = 0;   // eager launches carry the same attributes as the captured ones
};

// Microseconds per extra programmatic edge; NaN when extra_edges is 0 or the difference is NaN.
double us_per_edge(double delta_us, int extra_edges);

std::array<ModeSummary, kNumLaunchModes> summarize_case(const CaseRun& run);

}  // namespace tpserve::bench
