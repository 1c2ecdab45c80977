// The numbers tp_decode reports, per arm and concurrency: per-request decode tok/s ((tokens - 1) / (last -
// first token time), median over the requests of all rounds), the decode-only step time (steps without
// prefill: median, p10, p90), TTFT, output tok/s, bytes per step with the HBM floor where a bandwidth is
// known, and the GPU busy share where the device probe measures it. Per pair of arms and concurrency: the
// median of the per-round differences of the step time median, and the share of rounds where its sign held.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "bench/common/sample_stats.h"
#include "bench/tp_decode/decode_sweep.h"

namespace tpserve::bench {

struct ArmSummary {
  std::string arm;
  int concurrency = 0;
  int rounds = 0;
  int requests = 0;
  Distribution request_decode_tps;  // per request
  Distribution decode_step_ms;      // decode-only steps of every round
  Distribution ttft_ms;
  double output_tps = 0;      // median over rounds of the round's tokens / wall time
  double bytes_per_step = 0;  // median over decode-only steps (rank 0); NaN when unknown
  double floor_ms = 0;        // bytes_per_step / bandwidth; NaN without a bandwidth
  double floor_share = 0;     // floor_ms / decode step median (1 = at the floor)
  double busy_share = 0;      // median over decode-only steps of busy / wall; NaN when unknown
  // Speculative decoding (arms with drafts; NaN otherwise), over all rounds: accepted / proposed drafts,
  // and tokens emitted per verification (1 + accepted / verifications).
  double draft_acceptance = 0;
  double mean_accepted_length = 0;
  std::vector<double> round_step_median_ms;  // per round index (NaN: no decode-only step in that round)
};

struct PairSummary {
  std::string a, b;  // difference = b - a
  int concurrency = 0;
  PairedDifference step_ms;
};

struct SweepSummary {
  std::vector<ArmSummary> arms;  // concurrency-major, arms in the order given
  std::vector<PairSummary> pairs;
  std::optional<double> hbm_gbps;
  std::string bandwidth_source;
};

SweepSummary summarize_sweep(const SweepOptions& options, const SweepResult& result);

}  // namespace tpserve::bench
