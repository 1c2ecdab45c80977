// The driver loop of one round: submit, step until idle, time each step, attribute token events.
#include "bench/tp_decode/decode_round.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <random>

#include "common/counter_hash.h"
#include "common/error.h"

namespace tpserve::bench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

// splitmix64 (one step): decorrelates nearby (seed, concurrency, round, request) tuples.
uint64_t mix(uint64_t x) {
  return mix64(x + 0x9e3779b97f4a7c15ull);
}

// A structured-output rule that allows every token and is always whole: a masked step's cost alone.
class EveryToken : public TokenConstraint {
 public:
  bool active() const override { return true; }
  void allowed(uint32_t* words, int num_words) override { std::fill(words, words + num_words, ~0u); }
  bool complete() const override { return true; }
  bool finished() const override { return false; }
  bool advance(int32_t) override { return true; }
};

}  // namespace

double RequestSample::decode_tokens_per_s() const {
  if (tokens < 2 || last_token_s <= first_token_s) return kNaN;
  return (tokens - 1) / (last_token_s - first_token_s);
}

std::vector<std::vector<int32_t>> make_prompts(uint64_t seed, int concurrency, int round, int input_len,
                                               int vocab, int shared_prefix_len) {
  TPS_CHECK(vocab > 0 && input_len > 0, "prompts of ", input_len, " tokens from a vocabulary of ", vocab);
  TPS_CHECK(shared_prefix_len >= 0 && shared_prefix_len <= input_len, "a shared prefix of ",
            shared_prefix_len, " tokens in prompts of ", input_len);
  std::uniform_int_distribution<int32_t> token(0, vocab - 1);
  std::vector<int32_t> shared(shared_prefix_len);
  std::mt19937_64 shared_rng(mix(mix(seed) ^ 0x5eedull));
  for (auto& t : shared) t = token(shared_rng);
  std::vector<std::vector<int32_t>> prompts(concurrency, shared);
  for (int i = 0; i < concurrency; ++i) {
    std::mt19937_64 rng(
        mix(mix(mix(seed) ^ static_cast<uint64_t>(concurrency)) ^ static_cast<uint64_t>(round + 1)) ^
        static_cast<uint64_t>(i));
    while (static_cast<int>(prompts[i].size()) < input_len) prompts[i].push_back(token(rng));
  }
  return prompts;
}

int RoundRecord::decode_only_steps() const {
  return static_cast<int>(
      std::count_if(steps.begin(), steps.end(), [](const StepSample& s) { return !s.stats.has_prefill(); }));
}

RoundRecord run_decode_round(Engine& engine, const RoundSpec& spec, const StepCostModel* cost,
                             DeviceProbe& probe) {
  Scheduler& scheduler = engine.scheduler();
  TPS_CHECK(!scheduler.has_work(), "a round starts on an idle engine");
  RoundRecord rec;
  rec.concurrency = spec.concurrency;
  rec.round = spec.round;
  rec.requests.resize(spec.concurrency);

  const auto prompts = make_prompts(spec.seed, spec.concurrency, spec.round, spec.input_len,
                                    engine.spec().vocab_size, spec.shared_prefix_len);
  const SpeculativeMetrics spec_before = scheduler.speculative_metrics();
  const Clock::time_point start = Clock::now();
  for (int i = 0; i < spec.concurrency; ++i) {
    Request r;
    r.id = i + 1;  // the scheduler is idle: ids only need to be unique within the round
    r.prompt = prompts[i];
    r.sampling = SamplingParams{};  // greedy
    r.max_tokens = spec.output_len;
    r.ignore_eos = true;
    r.processing = spec.processing;
    if (spec.token_mask) r.constraint = std::make_shared<EveryToken>();
    scheduler.add(std::move(r));
  }

  // Every request emits output_len tokens; prefill takes at most one step per prompt chunk.
  const int64_t step_limit = int64_t(spec.concurrency) * (spec.input_len + spec.output_len) + 16;
  while (scheduler.has_work()) {
    TPS_CHECK(static_cast<int64_t>(rec.steps.size()) < step_limit, "round did not finish within ", step_limit,
              " steps");
    probe.step_begin();
    const Clock::time_point t0 = Clock::now();
    const std::vector<TokenEvent> events = engine.step();
    const Clock::time_point t1 = Clock::now();
    const std::optional<double> busy = probe.step_end_busy_seconds(!engine.last_step_stats().has_prefill());

    StepSample step{.wall_s = seconds(t1 - t0),
                    .stats = engine.last_step_stats(),
                    .bytes = kNaN,
                    .busy_s = busy.value_or(kNaN)};
    if (cost != nullptr && step.stats.tokens > 0) {
      const StepShape shape{step.stats.tokens, step.stats.samples, step.stats.context_tokens};
      step.bytes = cost->step_bytes(shape, engine.model().last_step_routing()).total();
    }
    rec.steps.push_back(step);

    const double at = seconds(t1 - start);
    for (const TokenEvent& e : events) {
      TPS_CHECK(e.token >= 0 && e.request_id >= 1 && e.request_id <= spec.concurrency,
                "unexpected event for request ", e.request_id, " (", finish_reason_name(e.finish), ")");
      RequestSample& r = rec.requests[e.request_id - 1];
      if (r.tokens == 0) r.first_token_s = at;
      r.last_token_s = at;
      ++r.tokens;
      if (spec.keep_tokens) r.token_ids.push_back(e.token);
    }
  }
  rec.wall_s = seconds(Clock::now() - start);
  rec.kernels = probe.take_kernel_times();
  rec.phase_report = probe.take_phase_report();
  const SpeculativeMetrics& spec_after = scheduler.speculative_metrics();
  rec.drafts = spec_after.drafts - spec_before.drafts;
  rec.draft_tokens = spec_after.draft_tokens - spec_before.draft_tokens;
  rec.accepted_tokens = spec_after.accepted_tokens - spec_before.accepted_tokens;
  TPS_CHECK(!rec.steps.empty(), "a round ran no step");
  for (const auto& r : rec.requests)
    TPS_CHECK(r.tokens == spec.output_len, "a request produced ", r.tokens, " tokens instead of ",
              spec.output_len);
  return rec;
}

}  // namespace tpserve::bench
