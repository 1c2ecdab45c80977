// op_chain: what Programmatic Dependent Launch costs or saves per edge, on the MoE routing chain of each
// layer (router GEMM -> top-k gating -> consumer) stacked over a model's layers, captured in a CUDA graph
// and replayed, and launched eagerly. The consumer is launched three ways (<<<>>>, cudaLaunchKernelEx
// without attribute, with the PDL attribute); rounds run the modes in A/B/B/A order. Prints a table and
// writes JSON. See docs/PERF.md.
//
//   op_chain [--shapes 64x8x2048x16,128x8x2048x48,512x10x2560x48] [--tokens 1,16,48] [--rounds 6]
//            [--replays 100] [--chain-pdl auto|on|off] [--device D] [--seed S] [--json out.json]
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>

#include "bench/common/tool_main.h"
#include "bench/op_chain/case_runner.h"
#include "bench/op_chain/chain_report.h"
#include "common/cuda_check.h"
#include "common/log.h"
#include "kernels/launch.h"
#include "runtime/tools/cli_validators.h"

namespace tpserve::bench {
namespace {

constexpr int kExitUsage = 2;

nlohmann::json device_json(int device) {
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  int sm_clock_khz = 0, mem_clock_khz = 0, driver = 0, runtime = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&sm_clock_khz, cudaDevAttrClockRate, device));
  CUDA_CHECK(cudaDeviceGetAttribute(&mem_clock_khz, cudaDevAttrMemoryClockRate, device));
  CUDA_CHECK(cudaDriverGetVersion(&driver));
  CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
  return {{"index", device},
          {"name", prop.name},
          {"sm", prop.major * 10 + prop.minor},
          {"multiprocessors", prop.multiProcessorCount},
          {"sm_clock_khz", sm_clock_khz},
          {"memory_clock_khz", mem_clock_khz},
          {"l2_bytes", prop.l2CacheSize},
          {"memory_bytes", prop.totalGlobalMem},
          {"driver_version", driver},
          {"runtime_version", runtime}};
}

nlohmann::json pdl_decisions_json(const std::vector<kernels::PdlReportRow>& rows) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& r : rows)
    out.push_back({{"site", kernels::site_name(r.site)},
                   {"kernel", r.kernel},
                   {"device_sm", r.device_sm},
                   {"kernel_sm", r.kernel_sm},
                   {"enrolled", r.enrolled},
                   {"enabled", r.decision.enabled},
                   {"reason", r.decision.reason},
                   {"launches", r.launches}});
  return out;
}

int run(int argc, char** argv) {
  ChainOptions o;
  std::string shapes = "64x8x2048x16,128x8x2048x48,512x10x2560x48", tokens = "1,16,48", chain_pdl = "auto";
  CLI::App app{"op_chain: PDL cost per edge on the router GEMM -> top-k -> consumer chain, graph and eager"};
  app.add_option("--shapes", shapes, "EXPERTSxTOPKxHIDDENxLAYERS, comma-separated")->capture_default_str();
  app.add_option("--tokens", tokens, "token counts, comma-separated")->capture_default_str();
  app.add_option("--rounds", o.rounds, "rounds (each runs every launch mode once, A/B/B/A)")
      ->capture_default_str();
  app.add_option("--replays", o.replays, "graph replays (and eager chains) timed per mode and round")
      ->capture_default_str();
  app.add_option("--chain-pdl", chain_pdl, "PDL of the router GEMM and top-k launches (launch.pdl.default)")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->capture_default_str();
  app.add_option("--device", o.device, "CUDA device index")->capture_default_str();
  app.add_option("--seed", o.seed, "seed of the random weights and inputs")
      ->capture_default_str()
      ->check(tpserve::non_negative_integer());
  app.add_option("--json", o.json_path, "write every round's timing, the graphs' counts and the summary");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    o.shapes = parse_chain_shapes(shapes);
    o.tokens = parse_token_counts(tokens);
    o.chain_pdl = *kernels::parse_pdl_mode(chain_pdl);
    check_chain_options(o);
  } catch (const Error& e) {
    std::fprintf(stderr, "op_chain: %s\n", e.what());
    return kExitUsage;
  }
  apply_log_level_env();

  const int max_tokens = *std::max_element(o.tokens.begin(), o.tokens.end());
  CudaBackendOptions options;
  options.device = o.device;
  options.pdl.default_mode = o.chain_pdl;
  options.pdl.kill_switch = kernels::pdl_kill_switch_from_env();
  options.workspace_bytes = size_t(16) << 20;  // no op of the chain uses the per-op scratch
  options.arena_bytes = options.workspace_bytes + options.cublas_workspace_bytes + (size_t(64) << 20);
  for (const ChainShape& s : o.shapes) options.arena_bytes += chain_device_bytes(s, max_tokens);
  auto backend = make_cuda_backend(options);

  std::vector<CaseRun> runs;
  for (const ChainShape& shape : o.shapes) {
    ChainBuffers buffers(*backend, shape, max_tokens, o.seed);
    for (int t : o.tokens) runs.push_back(run_case(*backend, buffers, t, o));
  }

  std::cout << format_chain_table(runs) << "\nlaunch policy (router GEMM, top-k; --chain-pdl "
            << kernels::pdl_mode_name(o.chain_pdl) << "):\n"
            << kernels::format_pdl_report(backend->launch_policy().report()) << std::flush;
  const bool all_match =
      std::all_of(runs.begin(), runs.end(), [](const CaseRun& r) { return r.outputs_match; });
  if (!o.json_path.empty()) {
    const std::vector<std::string> command_line(argv, argv + argc);
    std::ofstream f(o.json_path);
    TPS_CHECK(f.good(), "cannot write ", o.json_path);
    f << chain_json(o, runs, device_json(backend->device_index()),
                    pdl_decisions_json(backend->launch_policy().report()), command_line)
             .dump(1)
      << "\n";
    TPS_CHECK(f.good(), "error writing ", o.json_path);
    std::fprintf(stderr, "[op_chain] wrote %s\n", o.json_path.c_str());
  }
  if (!all_match) std::fprintf(stderr, "op_chain: the launch modes gave different outputs (see the table)\n");
  return all_match ? 0 : 1;
}

}  // namespace
}  // namespace tpserve::bench

int main(int argc, char** argv) {
  return tpserve::bench::tool_main("op_chain", [&] { return tpserve::bench::run(argc, argv); });
}
