// gating_cycles: SM clock cycles of the top-k gating alone (bench/gating_cycles/gating_cycles_kernel.h), for
// each k asked, the first pass of a launch (code fetched) and the later passes (code in the SM's caches), on
// every SM; the step's router runs it once a layer from code other kernels have displaced, and its phase
// marks put block 0's gating at about 3300-3500 cycles (docs/step_latency.md). The difference between k
// values is the cost of the arg-max rounds; k = 1 is the softmax, one round and the stores.
//
//   gating_cycles [--k 1,2,8] [--experts 128] [--reps 8] [--launches 3] [--no-redux] [--device D] [--seed S]
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "bench/common/tool_main.h"
#include "bench/gating_cycles/gating_cycles_kernel.h"
#include "common/cuda_check.h"
#include "runtime/tools/cli_validators.h"

namespace tpserve::bench {
namespace {

long long median_of(std::vector<long long> v) {
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

int run(int argc, char** argv) {
  GatingCyclesCase c;
  std::vector<int> ks = {1, 2, 8};
  int launches = 3, device = 0;
  uint64_t seed = 5;
  bool no_redux = false, by_probabilities = false;
  CLI::App app{"gating_cycles: SM clock cycles of the top-k gating alone, first and later passes"};
  app.add_option("--k", ks, "experts picked, comma-separated")->delimiter(',')->capture_default_str();
  app.add_option("--experts", c.experts, "experts (logits a token)")
      ->capture_default_str()
      ->check(CLI::Range(1, 128));
  app.add_option("--reps", c.reps, "passes a launch")->capture_default_str()->check(CLI::Range(2, 1000));
  app.add_option("--launches", launches, "launches in a row")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  app.add_flag("--no-redux", no_redux, "arg-max rounds by shuffles instead of redux.sync");
  app.add_flag("--by-probabilities", by_probabilities,
               "the softmax first and the rounds on the probabilities (runtime.topk_gating_by_logits=false)");
  app.add_option("--device", device, "CUDA device index")->capture_default_str();
  app.add_option("--seed", seed, "seed of the logits")->capture_default_str()->check(non_negative_integer());
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  c.redux = !no_redux;
  c.by_logits = !by_probabilities;
  CUDA_CHECK(cudaSetDevice(device));
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  std::printf(
      "%s, %d SMs; %d experts, rounds on the %s, redux %s, %d passes a launch; cycles: median over "
      "the SMs\n",
      prop.name, prop.multiProcessorCount, c.experts, c.by_logits ? "logits" : "probabilities",
      c.redux ? "on" : "off", c.reps);
  std::printf("%-4s %-7s %12s %12s %12s\n", "k", "launch", "first pass", "later passes", "later max");
  for (int k : ks) {
    c.k = k;
    const std::vector<std::vector<long long>> cycles = run_gating_cycles(c, launches, seed);
    for (size_t l = 0; l < cycles.size(); ++l) {
      std::vector<long long> first, later;
      for (size_t i = 0; i < cycles[l].size(); ++i) (i % c.reps == 0 ? first : later).push_back(cycles[l][i]);
      std::printf("%-4d %-7zu %12lld %12lld %12lld\n", k, l + 1, median_of(first), median_of(later),
                  *std::max_element(later.begin(), later.end()));
    }
  }
  return 0;
}

}  // namespace
}  // namespace tpserve::bench

int main(int argc, char** argv) {
  return tpserve::bench::tool_main("gating_cycles", [&] { return tpserve::bench::run(argc, argv); });
}
