// handoff: what it costs a chain of dependent GEMV stages (x_{s+1} = W_s x_s, hidden x hidden bf16 weights a
// stage) to hand each stage's output to the next, as separate grids (with and without PDL) and inside one
// persistent grid whose stages meet at a counter in global memory (kernels/grid_stage.cuh), against the HBM
// floor of the weights measured in the same run. The measurement docs/step_latency.md's Design 2 asks for
// before a persistent layer kernel is written. Prints a table and writes JSON (docs/PERF.md).
//
//   handoff [--hidden 1024,2048] [--stages 48] [--rounds 6] [--replays 20] [--device D] [--seed S]
//           [--json out.json]
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "bench/bench_kernels.h"
#include "bench/common/build_info.h"
#include "bench/common/machine_info.h"
#include "bench/common/sample_stats.h"
#include "bench/common/tool_main.h"
#include "bench/handoff/handoff_run.h"
#include "common/cuda_check.h"
#include "common/error.h"
#include "common/log.h"
#include "runtime/tools/cli_validators.h"

namespace tpserve::bench {
namespace {

constexpr int kExitUsage = 2;
constexpr size_t kBandwidthBytes = size_t(2) << 30;  // several times any L2

double measure_bandwidth_gbps(cudaStream_t stream, int sms) {
  struct Buffers {
    void* data = nullptr;
    float* partial = nullptr;
    ~Buffers() {
      cudaFree(data);
      cudaFree(partial);
    }
  } b;
  CUDA_CHECK(cudaMalloc(&b.data, kBandwidthBytes));
  CUDA_CHECK(cudaMalloc(&b.partial, sizeof(float) * sms * 4));
  kernels::LaunchPolicy policy;
  launch_fill_bf16(policy, stream, b.data, kBandwidthBytes, 17);
  return time_read_bandwidth_gbps(policy, stream, b.data, kBandwidthBytes, b.partial, sms * 4, 9);
}

std::vector<int> parse_hiddens(const std::string& text) {
  std::vector<int> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) {
    char* end = nullptr;
    const long v = std::strtol(item.c_str(), &end, 10);
    // Above 2560 a block's rows (twice, for persistent_2buf) outgrow an SM's shared memory.
    TPS_CHECK(!item.empty() && *end == '\0' && v >= 64 && v <= 2560 && v % 8 == 0,
              "--hidden: expected sizes in [64, 2560], multiples of 8, comma-separated; got '", item, "'");
    out.push_back(static_cast<int>(v));
  }
  TPS_CHECK(!out.empty(), "--hidden: no size given");
  return out;
}

std::string format_table(const std::vector<HandoffCase>& cases, double gbps) {
  std::ostringstream t;
  char line[256];
  std::snprintf(line, sizeof line, "%-7s %-16s %-15s %10s %8s %9s %7s %18s\n", "hidden", "grid", "arm",
                "chain us", "us/stage", "floor us", "floor%", "vs kernels_pdl");
  t << line;
  for (const HandoffCase& c : cases) {
    const double floor_us = c.weight_bytes / (gbps * 1e3);
    const std::string grid = std::to_string(c.blocks) + " x " + std::to_string(c.rows_per_block) + " rows";
    for (HandoffArm arm : kHandoffArms) {
      const int a = static_cast<int>(arm);
      const double us = median(c.us[a]);
      std::string vs = "-";
      if (arm != HandoffArm::kKernelsPdl) {
        const PairedDifference d = paired_difference(c.us[0], c.us[a]);
        char buf[64];
        std::snprintf(buf, sizeof buf, "%+.2f us (%d/%d)", d.median, d.sign_held, d.rounds);
        vs = buf;
      }
      std::snprintf(line, sizeof line, "%-7d %-16s %-15s %10.2f %8.3f %9.2f %6.1f%% %18s\n", c.hidden,
                    grid.c_str(), handoff_arm_name(arm), us, us / c.stages, floor_us, 100.0 * floor_us / us,
                    vs.c_str());
      t << line;
    }
  }
  return t.str();
}

nlohmann::json cases_json(const HandoffOptions& o, const std::vector<HandoffCase>& cases, double gbps,
                          const nlohmann::json& device, const std::vector<std::string>& command_line) {
  nlohmann::json runs = nlohmann::json::array();
  for (const HandoffCase& c : cases) {
    nlohmann::json arms = nlohmann::json::object();
    for (HandoffArm arm : kHandoffArms) {
      const int a = static_cast<int>(arm);
      arms[handoff_arm_name(arm)] = {{"chain_us", c.us[a]}, {"summary", to_json(summarize(c.us[a]))}};
      if (arm != HandoffArm::kKernelsPdl) {
        const PairedDifference d = paired_difference(c.us[0], c.us[a]);
        arms[handoff_arm_name(arm)]["vs_kernels_pdl"] = {
            {"median_us", d.median}, {"sign_held", d.sign_held}, {"rounds", d.rounds}};
      }
    }
    runs.push_back({{"hidden", c.hidden},
                    {"stages", c.stages},
                    {"blocks", c.blocks},
                    {"rows_per_block", c.rows_per_block},
                    {"weight_bytes", c.weight_bytes},
                    {"floor_us", c.weight_bytes / (gbps * 1e3)},
                    {"order", c.order},
                    {"outputs_match", c.outputs_match},
                    {"arms", arms}});
  }
  return {{"tool", "handoff"},
          {"command_line", command_line},
          {"options",
           {{"hidden", o.hiddens},
            {"stages", o.stages},
            {"rounds", o.rounds},
            {"replays", o.replays},
            {"seed", o.seed}}},
          {"hbm_read_gbps", gbps},
          {"device", device},
          {"build", to_json(build_info())},
          {"machine", to_json(machine_info())},
          {"cases", runs}};
}

int run(int argc, char** argv) {
  HandoffOptions o;
  std::string hiddens = "1024,2048";
  CLI::App app{"handoff: a stage handoff as a kernel boundary (with and without PDL) or a grid counter"};
  app.add_option("--hidden", hiddens, "hidden sizes, comma-separated (weights hidden x hidden a stage)")
      ->capture_default_str();
  app.add_option("--stages", o.stages, "dependent stages a chain")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  app.add_option("--rounds", o.rounds, "rounds (each runs every arm once, A/B/B/A)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  app.add_option("--replays", o.replays, "graph replays timed per arm and round")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  app.add_option("--device", o.device, "CUDA device index")->capture_default_str();
  app.add_option("--seed", o.seed, "seed of the random weights and input")
      ->capture_default_str()
      ->check(tpserve::non_negative_integer());
  app.add_option("--json", o.json_path, "write every round's timing and the summary");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    o.hiddens = parse_hiddens(hiddens);
  } catch (const Error& e) {
    std::fprintf(stderr, "handoff: %s\n", e.what());
    return kExitUsage;
  }
  apply_log_level_env();

  CUDA_CHECK(cudaSetDevice(o.device));
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, o.device));
  cudaStream_t stream = nullptr;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const double gbps = measure_bandwidth_gbps(stream, prop.multiProcessorCount);
  std::vector<HandoffCase> cases;
  for (int hidden : o.hiddens) cases.push_back(run_handoff_case(hidden, o, prop.multiProcessorCount, stream));
  CUDA_CHECK(cudaStreamDestroy(stream));

  std::cout << prop.name << ", HBM read " << gbps << " GB/s (2 GiB reduction, this run); " << o.stages
            << " stages, " << o.rounds << " rounds x " << o.replays << " replays\n"
            << format_table(cases, gbps) << std::flush;
  bool all_match = true;
  for (const HandoffCase& c : cases) all_match = all_match && c.outputs_match;
  if (!o.json_path.empty()) {
    const nlohmann::json device = {{"name", prop.name},
                                   {"sm", prop.major * 10 + prop.minor},
                                   {"multiprocessors", prop.multiProcessorCount}};
    std::ofstream f(o.json_path);
    TPS_CHECK(f.good(), "cannot write ", o.json_path);
    f << cases_json(o, cases, gbps, device, std::vector<std::string>(argv, argv + argc)).dump(1) << "\n";
    TPS_CHECK(f.good(), "error writing ", o.json_path);
    std::fprintf(stderr, "[handoff] wrote %s\n", o.json_path.c_str());
  }
  if (!all_match) std::fprintf(stderr, "handoff: the arms gave different outputs\n");
  return all_match ? 0 : 1;
}

}  // namespace
}  // namespace tpserve::bench

int main(int argc, char** argv) {
  return tpserve::bench::tool_main("handoff", [&] { return tpserve::bench::run(argc, argv); });
}
