// One tp_decode round on the driver: submit `concurrency` requests at once (random prompt token ids from a
// seeded RNG, greedy, ignore_eos, max_tokens = output_len), step the engine until every request finished,
// and record each step's host wall time (steady_clock around engine.step()) and what it ran, and each
// request's first and last token times and token count. Byte counts and device busy time are gathered
// after each step, outside the timed region.
#pragma once

#include <cstdint>
#include <vector>

#include "bench/tp_decode/device_probe.h"
#include "bench/tp_decode/step_cost_model.h"
#include "runtime/engine/engine.h"

namespace tpserve::bench {

struct StepSample {
  double wall_s = 0;  // engine.step(), host clock
  StepStats stats;
  double bytes = 0;   // StepCostModel total for rank 0; NaN when not known
  double busy_s = 0;  // device busy time in the step; NaN when not known
};

struct RequestSample {
  double first_token_s = 0;  // since submission (all requests of a round are submitted at once): TTFT
  double last_token_s = 0;
  int tokens = 0;
  std::vector<int32_t> token_ids;  // the tokens, when the round keeps them (RoundSpec::keep_tokens)
  // (tokens - 1) / (last - first); NaN with fewer than two tokens.
  double decode_tokens_per_s() const;
};

struct RoundRecord {
  int arm = 0;
  int concurrency = 0;
  int round = 0;       // -1: warm-up (not recorded in results)
  int position = 0;    // index within the round's arm order
  double start_s = 0;  // since the sweep began
  double wall_s = 0;   // submission to the last token
  std::vector<StepSample> steps;
  std::vector<RequestSample> requests;
  std::vector<KernelTime> kernels;  // decode-only steps, longest first (with --gpu-busy on a GPU)
  std::string phase_report;         // decode-only steps' phase marks (with --phase-trace), else empty
  // The decode-only steps (no prefill in the batch): those `kernels` sums over.
  int decode_only_steps() const;
  // Speculative decoding in the round (the scheduler's metrics, before and after): verification groups,
  // drafts proposed, drafts accepted.
  int64_t drafts = 0, draft_tokens = 0, accepted_tokens = 0;
};

struct RoundSpec {
  int concurrency = 1;
  int input_len = 128;
  int shared_prefix_len = 0;  // leading prompt tokens every request of every round shares
  int output_len = 384;
  uint64_t seed = 0;
  int round = 0;
  bool keep_tokens = false;    // RequestSample::token_ids
  LogitProcessing processing;  // every request's (ArmSpec::processing)
  bool token_mask = false;     // every request under a rule allowing every token (ArmSpec::token_mask)
};

// Deterministic prompts: request i of (seed, concurrency, round) gets the same ids in every arm. The first
// shared_prefix_len ids are a function of the seed alone (a system prompt every request starts with).
std::vector<std::vector<int32_t>> make_prompts(uint64_t seed, int concurrency, int round, int input_len,
                                               int vocab, int shared_prefix_len = 0);

// Driver only; the engine must be idle. cost: nullptr to skip byte counts (else the engine must record
// routing). Does not stop the followers.
RoundRecord run_decode_round(Engine& engine, const RoundSpec& spec, const StepCostModel* cost,
                             DeviceProbe& probe);

}  // namespace tpserve::bench
