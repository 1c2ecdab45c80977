// Groups recorded rounds by (arm, concurrency); decode-only steps are those whose batch had no prefill.
#include "bench/tp_decode/sweep_summary.h"

#include <cmath>
#include <limits>

#include "bench/tp_decode/step_cost_model.h"

namespace tpserve::bench {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

ArmSummary summarize_arm(const SweepOptions& o, const SweepResult& r, int arm, int concurrency) {
  ArmSummary s;
  s.arm = o.arms[arm].name;
  s.concurrency = concurrency;
  s.round_step_median_ms.assign(o.rounds, kNaN);
  std::vector<double> tps, step_ms, ttft_ms, output_tps, bytes, busy;
  int64_t drafts = 0, draft_tokens = 0, accepted = 0;
  for (const RoundRecord& rec : r.rounds) {
    if (rec.arm != arm || rec.concurrency != concurrency) continue;
    ++s.rounds;
    drafts += rec.drafts, draft_tokens += rec.draft_tokens, accepted += rec.accepted_tokens;
    std::vector<double> round_steps;
    int64_t tokens = 0;
    for (const StepSample& step : rec.steps) {
      if (step.stats.has_prefill()) continue;
      round_steps.push_back(step.wall_s * 1e3);
      if (!std::isnan(step.bytes)) bytes.push_back(step.bytes);
      if (!std::isnan(step.busy_s) && step.wall_s > 0) busy.push_back(step.busy_s / step.wall_s);
    }
    step_ms.insert(step_ms.end(), round_steps.begin(), round_steps.end());
    if (rec.round >= 0 && rec.round < o.rounds) s.round_step_median_ms[rec.round] = median(round_steps);
    for (const RequestSample& q : rec.requests) {
      ++s.requests;
      tokens += q.tokens;
      tps.push_back(q.decode_tokens_per_s());
      ttft_ms.push_back(q.first_token_s * 1e3);
    }
    if (rec.wall_s > 0) output_tps.push_back(static_cast<double>(tokens) / rec.wall_s);
  }
  std::erase_if(tps, [](double v) { return std::isnan(v); });
  s.request_decode_tps = summarize(tps);
  s.decode_step_ms = summarize(step_ms);
  s.ttft_ms = summarize(ttft_ms);
  s.output_tps = median(output_tps);
  s.bytes_per_step = median(bytes);
  s.floor_ms = r.hbm_gbps && !std::isnan(s.bytes_per_step)
                   ? hbm_floor_seconds(s.bytes_per_step, *r.hbm_gbps) * 1e3
                   : kNaN;
  s.floor_share = s.floor_ms / s.decode_step_ms.median;
  s.busy_share = median(busy);
  s.draft_acceptance =
      draft_tokens > 0 ? static_cast<double>(accepted) / static_cast<double>(draft_tokens) : kNaN;
  s.mean_accepted_length =
      drafts > 0 ? 1.0 + static_cast<double>(accepted) / static_cast<double>(drafts) : kNaN;
  return s;
}

}  // namespace

SweepSummary summarize_sweep(const SweepOptions& o, const SweepResult& r) {
  SweepSummary sum;
  sum.hbm_gbps = r.hbm_gbps;
  sum.bandwidth_source = r.bandwidth_source;
  const int arms = static_cast<int>(o.arms.size());
  for (int c : o.concurrency) {
    const size_t first = sum.arms.size();
    for (int a = 0; a < arms; ++a) sum.arms.push_back(summarize_arm(o, r, a, c));
    for (int a = 0; a < arms; ++a)
      for (int b = a + 1; b < arms; ++b)
        sum.pairs.push_back({o.arms[a].name, o.arms[b].name, c,
                             paired_difference(sum.arms[first + a].round_step_median_ms,
                                               sum.arms[first + b].round_step_median_ms)});
  }
  return sum;
}

}  // namespace tpserve::bench
