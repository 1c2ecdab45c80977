// SweepOptions: what one tp_decode run measures (config, concurrency levels, lengths, rounds, arms, outputs),
// and the parsers of its list-valued flags: `--concurrency 1,2,4` and `--arm name:key=value[,key=value]`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtime/engine/logit_adjuster.h"

namespace tpserve::bench {

// One side of an A/B comparison: config overrides applied on top of the config file and --set.
struct ArmSpec {
  std::string name;
  std::vector<std::string> overrides;  // "key.path=value", as --set takes them
  // tp_decode's own keys (not config): `bench.scripted_drafts=k` (1..4) verifies k scripted drafts per
  // sequence and step, each right with probability `bench.draft_acceptance=p` (default 1), against the
  // greedy continuations of a reference run without speculation (scripted_drafts.h).
  int scripted_drafts = 0;
  double draft_acceptance = 1.0;
  // `bench.skip_all_reduce=1` (several ranks): the all-reduces do nothing (skip_all_reduce.h), so that the
  // arm's step time against the same arm without it is what they cost.
  bool skip_all_reduce = false;
  // Every request of the arm with logit processing (docs/serving.md, "Logit bias, penalties and
  // min_tokens"): `bench.presence_penalty`, `bench.frequency_penalty`, `bench.repetition_penalty`, and
  // `bench.logit_bias_tokens=n` (a bias of 0.5 on tokens 0..n-1), so that the arm's step time against the
  // same arm without them is what they cost (their steps run eagerly).
  LogitProcessing processing;
  // `bench.token_mask=1`: every request under a structured-output rule that allows every token (docs/
  // serving.md, "Structured output"), so that the arm's step time against the same arm without it is what a
  // step's token masks cost (the masks' copy and kernel, and eager steps), not a grammar's host work.
  bool token_mask = false;
};

struct SweepOptions {
  std::string config_path;
  std::vector<std::string> overrides;  // --set: every arm
  std::vector<int> concurrency = {1, 2, 4, 8, 12, 16, 32, 64};
  int input_len = 128;
  int shared_prefix_len = 0;  // --shared-prefix: leading prompt tokens common to every request
  int output_len = 384;
  int rounds = 6;
  std::vector<ArmSpec> arms;          // none given: one arm "base" without overrides
  uint64_t seed = 0;                  // prompts are a function of (seed, concurrency, round, request)
  std::optional<double> hbm_gbps;     // memory bandwidth for the floor; else measured where the backend can
  bool one_engine_at_a_time = false;  // build each arm's engine per round instead of all up front
  bool warmup = true;                 // one unrecorded round per engine before measuring
  bool gpu_busy = false;              // GPU busy time per step (CUPTI on CUDA; adds tracing overhead)
  bool phase_trace = false;           // kernels' phase marks per decode step (a TPSERVE_PHASE_TRACE build)
  int phase_trace_layer = -1;         // with phase_trace: the layer traced (0-based); -1: the last
  std::string json_path, csv_path, plot_path;
};

// "1,2,4": positive, distinct, in the order given.
std::vector<int> parse_concurrency_list(const std::string& text);
// "name:key=value,key=value" or "name" alone (no overrides). Commas inside [...] or {...} belong to the value
// (`b:cuda_graph.capture_sizes=[1,2,4]`).
ArmSpec parse_arm(const std::string& text);
// Splits at `separator` outside brackets and braces.
std::vector<std::string> split_top_level(const std::string& text, char separator);
// Checks ranges and arm names (unique); adds the default arm when none was given. Throws tpserve::Error.
void finalize_options(SweepOptions& options);

}  // namespace tpserve::bench
