// tp_decode: the engine in-process (no HTTP) swept over concurrency levels, with A/B arms (config overrides)
// run in paired rounds. Rank 0 drives and records; under mpirun the other ranks follow. Prints a table,
// writes JSON (every raw sample), CSV (the summary) and an SVG plot. See docs/PERF.md.
//
//   mpirun -np 2 build/bench/tp_decode --config configs/qwen3-30b-a3b-tp2.yaml --concurrency 1,2,4,8
//       --arm graphs:cuda_graph.enabled=true --arm eager:cuda_graph.enabled=false --json out.json --plot
//       out.svg
#include <unistd.h>
#include <CLI/CLI.hpp>

#include "runtime/tools/main_guard.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>

#include "bench/tp_decode/decode_sweep.h"
#include "bench/tp_decode/sweep_report.h"
#include "bench/tp_decode/sweep_summary.h"
#include "common/error.h"
#include "common/log.h"
#include "parallel/mpi_session.h"
#include "runtime/config/config_parser.h"
#include "runtime/tools/cli_validators.h"

namespace {

constexpr int kExitUsage = 2;

// Written whole to path.tmp, then renamed: a sweep that fails leaves no half or empty file under the name.
void write_file(const std::string& path, const std::string& text) {
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary);
    TPS_CHECK(out.good(), "cannot write ", temporary);
    out << text;
    out.close();
    TPS_CHECK(out.good(), "error writing ", temporary);
  }
  TPS_CHECK(std::rename(temporary.c_str(), path.c_str()) == 0, "cannot rename ", temporary, " to ", path,
            ": ", std::strerror(errno));
  std::fprintf(stderr, "[tp_decode] wrote %s\n", path.c_str());
}

// Whether `path` could be written at the end of the sweep (its folder exists and is writable, and so is the
// file where it exists), without creating anything now.
void check_writable(const std::string& path) {
  namespace fs = std::filesystem;
  const fs::path folder = fs::path(path).has_parent_path() ? fs::path(path).parent_path() : fs::path(".");
  std::error_code ec;
  TPS_CHECK(fs::is_directory(folder, ec), "cannot write ", path, ": no folder ", folder.string());
  TPS_CHECK(::access(folder.c_str(), W_OK) == 0, "cannot write ", path, ": folder ", folder.string(),
            " is not writable");
  TPS_CHECK(!fs::exists(path, ec) || ::access(path.c_str(), W_OK) == 0, "cannot write ", path);
}

int run(int argc, char** argv) {
  using namespace tpserve::bench;
  SweepOptions o;
  std::string concurrency = "1,2,4,8,12,16,32,64";
  std::vector<std::string> arms;
  double hbm_gbps = 0;
  bool no_warmup = false;
  CLI::App app{
      "tp_decode: decode throughput and step time of the engine over concurrency, A/B arms in paired rounds"};
  app.add_option("--config", o.config_path, "YAML config file")->required();
  app.add_option("--set", o.overrides, "override a config key for every arm (repeatable)");
  app.add_option("--concurrency", concurrency, "comma-separated concurrency levels")->capture_default_str();
  app.add_option("--input-len", o.input_len, "prompt tokens per request")->capture_default_str();
  app.add_option(
         "--shared-prefix", o.shared_prefix_len,
         "leading prompt tokens every request shares (a system prompt; with prefix caching, computed once)")
      ->capture_default_str();
  app.add_option("--output-len", o.output_len, "generated tokens per request")->capture_default_str();
  app.add_option("--rounds", o.rounds, "rounds per concurrency (each runs every arm once)")
      ->capture_default_str();
  app.add_option("--arm", arms, "name:key=value[,key=value]: one arm of the comparison (repeatable)");
  app.add_option("--seed", o.seed, "prompt seed")
      ->capture_default_str()
      ->check(tpserve::non_negative_integer());
  app.add_option("--hbm-gbps", hbm_gbps,
                 "memory bandwidth for the floor (default: measured where the backend can)");
  app.add_flag("--one-engine-at-a-time", o.one_engine_at_a_time,
               "build each arm's engine per run (saves memory)");
  app.add_flag("--no-warmup", no_warmup, "skip the unrecorded warm-up round of each engine");
  app.add_flag(
      "--gpu-busy", o.gpu_busy,
      "measure the GPU busy share of each step (CUDA: CUPTI activity; tracing adds overhead to the step)");
  app.add_flag("--phase-trace", o.phase_trace,
               "print where the traced kernels' time goes in each round's decode steps (their phase marks; "
               "needs a build with -DTPSERVE_PHASE_TRACE=ON)");
  app.add_option(
      "--phase-trace-layer", o.phase_trace_layer,
      "with --phase-trace: the layer whose kernels are traced, from 0 (default: the last), counted in "
      "each traced kernel's launches of the step: one a layer where the router is fused (up to "
      "runtime.router_fused_max_tokens sequences), the RMSNorm one more");
  app.add_option("--json", o.json_path, "write every sample and the summary as JSON");
  app.add_option("--csv", o.csv_path, "write the summary table as CSV");
  app.add_option("--plot", o.plot_path, "write the plot as SVG");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    o.concurrency = parse_concurrency_list(concurrency);
    const bool concurrency_given = app.count("--concurrency") > 0;
    for (const auto& a : arms) o.arms.push_back(parse_arm(a));
    if (hbm_gbps != 0) o.hbm_gbps = hbm_gbps;
    o.warmup = !no_warmup;
    finalize_options(o);
    // Every arm's config is checked before MPI starts, so a typo fails fast with the config's message.
    // A concurrency above an arm's max_batch would mix steps of max_batch and of the rest in one median: an
    // error when asked for, and the default list stops at the smallest max_batch.
    int max_batch = std::numeric_limits<int>::max();
    for (const auto& arm : o.arms) {
      const tpserve::Config config = load_arm_config(o, arm);
      tpserve::set_log_level(config.logging.level);
      max_batch = std::min(max_batch, config.runtime.max_batch);
      for (int c : o.concurrency)
        TPS_CHECK(!concurrency_given || c <= config.runtime.max_batch, "--concurrency ", c, " is above arm ",
                  arm.name, "'s runtime.max_batch ", config.runtime.max_batch,
                  ": its steps would not all hold c sequences (raise it with --set runtime.max_batch=", c,
                  ")");
    }
    if (!concurrency_given) std::erase_if(o.concurrency, [&](int c) { return c > max_batch; });
    TPS_CHECK(!o.concurrency.empty(), "--concurrency: no level within runtime.max_batch ", max_batch);
    if (o.rounds % 2 != 0 && o.arms.size() > 1)
      std::fprintf(stderr,
                   "tp_decode: warning: --rounds %d is odd: the arm that runs first in a round does so once "
                   "more than the other, which biases their paired difference; an even count balances it\n",
                   o.rounds);
    // The output files can be written: a long sweep's samples are not lost at its end.
    for (const std::string* path : {&o.json_path, &o.csv_path, &o.plot_path})
      if (!path->empty()) check_writable(*path);
  } catch (const tpserve::Error& e) {
    std::fprintf(stderr, "tp_decode: %s\n", e.what());
    return kExitUsage;
  }
  tpserve::apply_log_level_env();

  tpserve::parallel::MpiSession mpi(&argc, &argv);
  const SweepResult result = run_sweep(o);
  if (mpi.rank() != 0) return 0;

  const SweepSummary summary = summarize_sweep(o, result);
  std::cout << format_summary_table(summary) << std::flush;
  const std::vector<std::string> command_line(argv, argv + argc);
  if (!o.json_path.empty())
    write_file(o.json_path, sweep_json(o, result, summary, command_line).dump(1) + "\n");
  if (!o.csv_path.empty()) write_file(o.csv_path, summary_csv(summary));
  if (!o.plot_path.empty()) {
    const std::string title = "tp_decode " + o.config_path + ": input " + std::to_string(o.input_len) +
                              ", output " + std::to_string(o.output_len) + ", " + std::to_string(o.rounds) +
                              " rounds, " + std::to_string(result.world_size) + " rank(s)";
    write_file(o.plot_path, sweep_plot_svg(summary, title));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return tpserve::run_guarded([&] { return run(argc, argv); });
}
