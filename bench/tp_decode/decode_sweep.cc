// Engines per arm (built up front or per run), warm-up, then the schedule; rank 0 records.
#include "bench/tp_decode/decode_sweep.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>

#include "bench/common/arm_schedule.h"
#include "bench/common/sample_stats.h"
#include "bench/tp_decode/scripted_drafts.h"
#include "bench/tp_decode/skip_all_reduce.h"
#include "runtime/config/config_parser.h"
#include "runtime/tools/runtime_setup.h"

namespace tpserve::bench {
namespace {

using Clock = std::chrono::steady_clock;

// One arm's engine with what it needs around it (the communicator must outlive the engine).
struct ArmRuntime {
  std::unique_ptr<ScriptedDraftSource> drafts;  // arms with bench.scripted_drafts (outlives the engine)
  std::unique_ptr<RuntimeSetup> setup;
  std::unique_ptr<Engine> engine;
  std::unique_ptr<DeviceProbe> probe;
  std::unique_ptr<StepCostModel> cost;
  LogitProcessing processing;  // every request's (ArmSpec::processing)
  bool token_mask = false;     // ArmSpec::token_mask
};

// The greedy continuations of every (concurrency, round) of the schedule, from an engine without
// speculation on `config` (one process only: the script runs on the driver's host).
std::shared_ptr<const ReferenceContinuations> run_reference(const SweepOptions& o, Config config) {
  config.speculative = SpeculativeConfig{};  // the plain greedy continuation
  RuntimeSetup setup(config);
  TPS_CHECK(setup.world().size() == 1, "scripted drafts (bench.scripted_drafts) run on one process, not ",
            setup.world().size());
  const std::unique_ptr<Engine> engine = setup.make_engine(EngineOptions{});
  const std::unique_ptr<DeviceProbe> probe = make_device_probe(engine->backend());
  auto reference = std::make_shared<ReferenceContinuations>(engine->spec().vocab_size);
  const Clock::time_point start = Clock::now();
  for (int c : o.concurrency)
    for (int round = 0; round < o.rounds; ++round) {
      RoundRecord rec = run_decode_round(*engine,
                                         RoundSpec{.concurrency = c,
                                                   .input_len = o.input_len,
                                                   .shared_prefix_len = o.shared_prefix_len,
                                                   .output_len = o.output_len,
                                                   .seed = o.seed,
                                                   .round = round,
                                                   .keep_tokens = true},
                                         nullptr, *probe);
      for (int i = 0; i < c; ++i) reference->add(c, round, i + 1, std::move(rec.requests[i].token_ids));
    }
  std::fprintf(stderr, "[tp_decode] reference continuations for scripted drafts: %.1f s\n",
               std::chrono::duration<double>(Clock::now() - start).count());
  return reference;
}

// Reference continuations per set of arm overrides (arms that differ only in their bench.* keys share one).
using References = std::map<std::vector<std::string>, std::shared_ptr<const ReferenceContinuations>>;

std::unique_ptr<ArmRuntime> build_arm(const SweepOptions& o, const ArmSpec& arm, ArmRecord* record,
                                      References& references) {
  const Config config = load_arm_config(o, arm);
  auto rt = std::make_unique<ArmRuntime>();
  EngineOptions options;
  if (arm.scripted_drafts > 0) {
    TPS_CHECK(config.speculative.method == SpeculativeMethod::kNone, "--arm ", arm.name,
              ": bench.scripted_drafts replaces MTP drafting (leave speculative.* out of the arm)");
    std::shared_ptr<const ReferenceContinuations>& reference = references[arm.overrides];
    if (!reference) reference = run_reference(o, config);
    rt->drafts = std::make_unique<ScriptedDraftSource>(reference, arm.draft_acceptance, o.input_len, o.seed);
    options.draft_script = rt->drafts->script();
    options.draft_script_tokens = arm.scripted_drafts;
  }
  rt->processing = arm.processing;
  rt->token_mask = arm.token_mask;
  rt->setup = std::make_unique<RuntimeSetup>(config);
  const bool driver = rt->setup->world().rank() == 0;
  options.record_routing = driver;
  RuntimeSetup::DataWrapper wrap;
  if (arm.skip_all_reduce) {
    TPS_CHECK(rt->setup->world().size() > 1, "--arm ", arm.name,
              ": bench.skip_all_reduce needs several ranks (one rank sums nothing)");
    wrap = make_skip_all_reduce_communicator;
  }
  rt->engine = rt->setup->make_engine(options, wrap);
  if (!driver) return rt;
  Engine& e = *rt->engine;
  TPS_CHECK(o.phase_trace_layer < e.spec().num_layers, "--phase-trace-layer ", o.phase_trace_layer,
            ": the model has ", e.spec().num_layers, " layers");
  rt->probe = make_device_probe(e.backend(), o.gpu_busy, o.phase_trace, o.phase_trace_layer);
  rt->cost =
      std::make_unique<StepCostModel>(e.spec(), e.model().layout(), dtype_size(e.backend().weight_dtype()),
                                      dtype_size(e.backend().activation_dtype()));
  if (record->config_yaml.empty()) {
    record->config_yaml = config_to_yaml(config);
    record->backend = e.backend().name();
    record->probe = rt->probe->name();
    record->cost_model = rt->cost->describe();
  }
  if (const auto gbps = rt->probe->measure_memory_bandwidth_gbps()) record->bandwidth_gbps.push_back(*gbps);
  return rt;
}

// One run on every rank: the driver records it, the followers serve it.
std::optional<RoundRecord> run_once(ArmRuntime& rt, const RoundSpec& spec) {
  Engine& e = *rt.engine;
  if (!e.is_driver()) {
    e.run_follower();
    return std::nullopt;
  }
  if (rt.drafts) rt.drafts->set_run(spec.concurrency, spec.round);
  RoundSpec arm_spec = spec;
  arm_spec.processing = rt.processing;
  arm_spec.token_mask = rt.token_mask;
  RoundRecord rec = run_decode_round(e, arm_spec, rt.cost.get(), *rt.probe);
  e.stop_followers();
  return rec;
}

void warm_up(const SweepOptions& o, ArmRuntime& rt) {
  const int c = *std::max_element(o.concurrency.begin(), o.concurrency.end());
  run_once(rt, RoundSpec{.concurrency = c,
                         .input_len = o.input_len,
                         .shared_prefix_len = o.shared_prefix_len,
                         .output_len = std::min(o.output_len, 16),
                         .seed = o.seed,
                         .round = -1});
}

void print_progress(const SweepOptions& o, const ArmRecord& arm, const RoundRecord& rec, size_t run,
                    size_t runs, double elapsed_s) {
  std::vector<double> step_ms, tps, host_ms, enqueue_ms, wait_ms;
  for (const auto& s : rec.steps) {
    if (s.stats.has_prefill()) continue;
    step_ms.push_back(s.wall_s * 1e3);
    const StepStats& t = s.stats;
    host_ms.push_back((t.schedule_s + t.broadcast_s + t.enqueue_s + t.complete_s) * 1e3);
    enqueue_ms.push_back(t.enqueue_s * 1e3);
    wait_ms.push_back(t.wait_s * 1e3);
  }
  for (const auto& r : rec.requests) tps.push_back(r.decode_tokens_per_s());
  std::fprintf(
      stderr,
      "[tp_decode] c=%d round %d/%d arm %s (run %zu/%zu): %zu steps, decode step median %.3f ms "
      "(host %.3f ms of it, %.3f enqueueing; waiting %.3f ms), %.1f tok/s per request, %.1f s elapsed\n",
      rec.concurrency, rec.round + 1, o.rounds, arm.spec.name.c_str(), run, runs, rec.steps.size(),
      median(step_ms), median(host_ms), median(enqueue_ms), median(wait_ms), median(tps), elapsed_s);
  if (!rec.phase_report.empty()) std::fputs(rec.phase_report.c_str(), stderr);
  const int decode_steps = rec.decode_only_steps();
  if (rec.kernels.empty() || decode_steps == 0) return;
  // Where the device time of a decode step goes (--gpu-busy): the kernels summed over the round's
  // decode-only steps, per step; and each kernel's advance of the step's chain
  // (bench/common/chain_advance.h).
  double total = 0, advance = 0;
  for (const KernelTime& k : rec.kernels) total += k.seconds, advance += k.advance_seconds;
  const double steps = decode_steps;
  std::fprintf(
      stderr,
      "  %-28s %9s %10s %10s %7s %10s %7s   (kernel time %.3f ms per decode step; under PDL a kernel's "
      "time includes its wait for the predecessor: profile with launch.pdl.default=off; chain: what "
      "it adds after the record that ended before it, %.3f ms of kernels per step)\n",
      "kernel", "per step", "us/launch", "us/step", "share", "chain us", "chain%", total / steps * 1e3,
      advance / steps * 1e3);
  for (const KernelTime& k : rec.kernels)
    std::fprintf(stderr, "  %-28s %9.1f %10.2f %10.1f %6.1f%% %10.2f %6.1f%%\n", k.name.substr(0, 28).c_str(),
                 double(k.launches) / steps, k.seconds / double(k.launches) * 1e6, k.seconds / steps * 1e6,
                 k.seconds / total * 100, k.advance_seconds / double(k.launches) * 1e6,
                 advance > 0 ? k.advance_seconds / advance * 100 : 0.0);
}

}  // namespace

Config load_arm_config(const SweepOptions& o, const ArmSpec& arm) {
  std::vector<std::string> overrides = o.overrides;
  overrides.insert(overrides.end(), arm.overrides.begin(), arm.overrides.end());
  Config config = load_config_file(o.config_path, overrides);
  if (o.input_len + o.output_len > config.runtime.max_seq_len)
    TPS_THROW("arm ", arm.name, ": --input-len ", o.input_len, " + --output-len ", o.output_len,
              " exceeds runtime.max_seq_len ", config.runtime.max_seq_len, " (raise it with --set)");
  return config;
}

SweepResult run_sweep(const SweepOptions& o) {
  const Clock::time_point start = Clock::now();
  SweepResult result;
  for (const auto& arm : o.arms) result.arms.push_back(ArmRecord{.spec = arm});

  std::vector<std::unique_ptr<ArmRuntime>> runtimes(o.arms.size());
  References references;  // run once per set of overrides, when its first scripted arm is built
  auto ensure_built = [&](int a) {
    if (runtimes[a]) return;
    runtimes[a] = build_arm(o, o.arms[a], &result.arms[a], references);
    if (o.warmup) warm_up(o, *runtimes[a]);
  };
  if (!o.one_engine_at_a_time)
    for (size_t a = 0; a < o.arms.size(); ++a) ensure_built(static_cast<int>(a));
  result.world_size = runtimes.empty() || !runtimes[0] ? 1 : runtimes[0]->setup->world().size();

  const std::vector<ScheduledRun> schedule =
      sweep_schedule(o.concurrency, o.rounds, static_cast<int>(o.arms.size()));
  for (size_t i = 0; i < schedule.size(); ++i) {
    const ScheduledRun& run = schedule[i];
    ensure_built(run.arm);
    ArmRuntime& rt = *runtimes[run.arm];
    result.world_size = rt.setup->world().size();
    const RoundSpec spec{.concurrency = run.concurrency,
                         .input_len = o.input_len,
                         .shared_prefix_len = o.shared_prefix_len,
                         .output_len = o.output_len,
                         .seed = o.seed,
                         .round = run.round};
    if (auto rec = run_once(rt, spec)) {
      rec->arm = run.arm;
      rec->position = run.position;
      rec->start_s = std::chrono::duration<double>(Clock::now() - start).count() - rec->wall_s;
      print_progress(o, result.arms[run.arm], *rec, i + 1, schedule.size(),
                     std::chrono::duration<double>(Clock::now() - start).count());
      result.rounds.push_back(std::move(*rec));
    }
    if (o.one_engine_at_a_time) runtimes[run.arm].reset();
  }

  std::vector<double> measured;
  for (const auto& arm : result.arms)
    measured.insert(measured.end(), arm.bandwidth_gbps.begin(), arm.bandwidth_gbps.end());
  if (o.hbm_gbps) {
    result.hbm_gbps = o.hbm_gbps, result.bandwidth_source = "--hbm-gbps";
  } else if (!measured.empty()) {
    result.hbm_gbps = median(measured), result.bandwidth_source = "measured";
  } else {
    result.bandwidth_source = "n/a";
  }
  result.wall_s = std::chrono::duration<double>(Clock::now() - start).count();
  return result;
}

}  // namespace tpserve::bench
