// Warm-up, capture, and the timed rounds of one case.
#include "bench/op_chain/case_runner.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <memory>

#include "bench/bench_kernels.h"
#include "bench/common/arm_schedule.h"
#include "common/cuda_check.h"

namespace tpserve::bench {
namespace {

// Spin lengths: longer than the host needs to queue the timed work (a graph launch, a kernel launch), so
// that the GPU never waits for the host inside the timed region. ~2 GHz SM clock.
constexpr long long kSpinCyclesPerGraph = 20000;
constexpr long long kSpinCyclesPerLaunch = 4000;
constexpr long long kMaxSpinCycles = 2000000000;

class EventTimer {
 public:
  EventTimer() {
    CUDA_CHECK(cudaEventCreate(&start_));
    CUDA_CHECK(cudaEventCreate(&stop_));
  }
  ~EventTimer() {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;

  // Mean microseconds per call of `work` over `count` calls queued behind a spin of `spin_cycles`.
  double mean_us(CudaBackend& be, int count, long long spin_cycles, const std::function<void()>& work) {
    launch_spin(be.launch_policy(), be.stream(), std::min(spin_cycles, kMaxSpinCycles));
    CUDA_CHECK(cudaEventRecord(start_, be.stream()));
    for (int i = 0; i < count; ++i) work();
    CUDA_CHECK(cudaEventRecord(stop_, be.stream()));
    CUDA_CHECK(cudaEventSynchronize(stop_));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
    return 1e3 * static_cast<double>(ms) / count;
  }

 private:
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

}  // namespace

CaseRun run_case(CudaBackend& be, ChainBuffers& buffers, int tokens, const ChainOptions& o) {
  CaseRun run;
  run.shape = buffers.shape();
  run.tokens = tokens;
  run.router_gemm = ChainBuffers::router_gemm_path(tokens);

  // Every mode once eagerly (first-use work such as cuBLASLt's plan happens outside any capture); the chain
  // is deterministic, so each mode's x_L must equal the reference bit for bit.
  buffers.enqueue(tokens, LaunchMode::kChevron);
  const std::vector<uint16_t> reference = buffers.read_output(tokens);
  bool match = true;
  for (LaunchMode mode : kLaunchModes) {
    buffers.enqueue(tokens, mode);
    match = match && buffers.read_output(tokens) == reference;
  }
  std::array<std::unique_ptr<StepGraph>, kNumLaunchModes> graphs;
  for (LaunchMode mode : kLaunchModes) {
    auto& graph = graphs[static_cast<int>(mode)];
    graph = be.capture([&] { buffers.enqueue(tokens, mode); });
    TPS_CHECK(graph != nullptr, "op_chain: the CUDA backend captured no graph");
    run.modes[static_cast<int>(mode)].graph = graph->report();
    graph->replay();
    match = match && buffers.read_output(tokens) == reference;
  }

  EventTimer timer;
  const long long eager_launches = 3LL * run.shape.layers * o.replays;
  for (int r = 0; r < o.rounds; ++r) {
    const std::vector<int> order = arm_order(kNumLaunchModes, r);
    run.order.push_back(order);
    for (int m : order) {
      const LaunchMode mode = kLaunchModes[m];
      ModeRun& out = run.modes[m];
      out.replay_us.push_back(
          timer.mean_us(be, o.replays, o.replays * kSpinCyclesPerGraph, [&] { graphs[m]->replay(); }));
      out.eager_us.push_back(timer.mean_us(be, o.replays, eager_launches * kSpinCyclesPerLaunch,
                                           [&] { buffers.enqueue(tokens, mode); }));
    }
    std::fprintf(stderr, "[op_chain] %s T=%d round %d/%d: replay us", run.shape.name().c_str(), tokens, r + 1,
                 o.rounds);
    for (LaunchMode mode : kLaunchModes)
      std::fprintf(stderr, " %s %.2f", mode_name(mode), run.modes[static_cast<int>(mode)].replay_us.back());
    std::fprintf(stderr, "\n");
  }
  match = match && buffers.read_output(tokens) == reference;
  run.outputs_match = match;
  return run;
}

}  // namespace tpserve::bench
