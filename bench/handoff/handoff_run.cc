#include "bench/handoff/handoff_run.h"

#include <cmath>

#include "bench/bench_kernels.h"
#include "bench/common/arm_schedule.h"
#include "common/counter_hash.h"
#include "common/cuda_check.h"
#include "common/dtype.h"
#include "common/error.h"

namespace tpserve::bench {
namespace {

// What a case allocates, freed when it ends (also on a throw).
struct DeviceBuffers {
  void* weights = nullptr;
  void* activations = nullptr;
  unsigned int* counter = nullptr;
  std::array<cudaGraphExec_t, kNumHandoffArms> graphs{};
  cudaEvent_t start = nullptr, stop = nullptr;
  ~DeviceBuffers() {
    for (cudaGraphExec_t g : graphs)
      if (g != nullptr) cudaGraphExecDestroy(g);
    if (start != nullptr) cudaEventDestroy(start);
    if (stop != nullptr) cudaEventDestroy(stop);
    cudaFree(weights);
    cudaFree(activations);
    cudaFree(counter);
  }
};

cudaGraphExec_t capture(const HandoffChain& c, HandoffArm arm, cudaStream_t stream) {
  cudaGraph_t graph = nullptr;
  CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  try {
    enqueue_handoff_chain(c, arm, stream);
  } catch (...) {
    cudaStreamEndCapture(stream, &graph);
    if (graph != nullptr) cudaGraphDestroy(graph);
    throw;
  }
  CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec = nullptr;
  const cudaError_t instantiated = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  CUDA_CHECK(instantiated);
  return exec;
}

std::vector<uint16_t> host_fill(size_t n, uint64_t seed) {
  std::vector<uint16_t> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = f32_to_bf16(static_cast<float>(2.0 * uniform_open01(seed, 0, i) - 1.0));
  return v;
}

}  // namespace

std::vector<uint16_t> handoff_weights_host(int hidden, int stages, uint64_t seed) {
  return host_fill(size_t(stages) * hidden * hidden, seed);
}

std::vector<uint16_t> handoff_input_host(int hidden, uint64_t seed) {
  return host_fill(size_t(hidden), seed + 1);
}

HandoffCase run_handoff_case(int hidden, const HandoffOptions& o, int sms, cudaStream_t stream) {
  TPS_CHECK(o.rounds > 0 && o.replays > 0 && o.stages > 0,
            "handoff: rounds, replays and stages must be positive");
  HandoffCase r;
  r.hidden = hidden;
  r.stages = o.stages;
  r.rows_per_block = handoff_rows_per_block(hidden, sms);
  r.blocks = hidden / r.rows_per_block;
  const size_t weight_elems = size_t(o.stages) * hidden * hidden;
  r.weight_bytes = double(weight_elems) * 2;

  DeviceBuffers d;
  CUDA_CHECK(cudaMalloc(&d.weights, weight_elems * 2));
  CUDA_CHECK(cudaMalloc(&d.activations, size_t(o.stages + 1) * hidden * 2));
  CUDA_CHECK(cudaMalloc(&d.counter, sizeof(unsigned int)));
  CUDA_CHECK(cudaEventCreate(&d.start));
  CUDA_CHECK(cudaEventCreate(&d.stop));
  kernels::LaunchPolicy policy;  // the fills carry no PDL (Pdl::kNever)
  launch_fill_bf16(policy, stream, d.weights, weight_elems * 2, o.seed);
  const std::vector<uint16_t> x0 = handoff_input_host(hidden, o.seed);
  CUDA_CHECK(cudaMemcpyAsync(d.activations, x0.data(), x0.size() * 2, cudaMemcpyHostToDevice, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));

  HandoffChain c;
  c.weights = static_cast<const kernels::bf16*>(d.weights);
  c.activations = static_cast<kernels::bf16*>(d.activations);
  c.counter = d.counter;
  c.stages = o.stages;
  c.hidden = hidden;
  c.rows_per_block = r.rows_per_block;
  c.scale = std::sqrt(3.0f / static_cast<float>(hidden));
  c.skew = o.skew;
  c.skip_waits = o.skip_waits;
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&c.sm_shared_bytes, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device));
  for (HandoffArm arm : kHandoffArms) {
    check_handoff_fits(c, arm, device);
    d.graphs[static_cast<int>(arm)] = capture(c, arm, stream);
  }

  bool same = true;
  for (int round = 0; round < o.rounds; ++round) {
    r.order.push_back(arm_order(kNumHandoffArms, round));
    for (int a : r.order.back()) {
      cudaGraphExec_t g = d.graphs[a];
      CUDA_CHECK(cudaGraphLaunch(g, stream));  // untimed: the first replay after another arm's
      CUDA_CHECK(cudaEventRecord(d.start, stream));
      for (int i = 0; i < o.replays; ++i) CUDA_CHECK(cudaGraphLaunch(g, stream));
      CUDA_CHECK(cudaEventRecord(d.stop, stream));
      CUDA_CHECK(cudaEventSynchronize(d.stop));
      float ms = 0;
      CUDA_CHECK(cudaEventElapsedTime(&ms, d.start, d.stop));
      r.us[a].push_back(1e3 * ms / o.replays);
      // A checked run, every round: every stage's output poisoned (NaN) first.
      std::vector<uint16_t> out(hidden);
      CUDA_CHECK(cudaMemsetAsync(c.activations + hidden, 0xff, size_t(o.stages) * hidden * 2, stream));
      CUDA_CHECK(cudaGraphLaunch(g, stream));
      CUDA_CHECK(cudaMemcpyAsync(out.data(), c.activations + size_t(o.stages) * hidden, size_t(hidden) * 2,
                                 cudaMemcpyDeviceToHost, stream));
      CUDA_CHECK(cudaStreamSynchronize(stream));
      if (round == 0)
        r.out[a] = std::move(out);
      else
        same = same && out == r.out[a];
    }
  }
  for (int a = 1; a < kNumHandoffArms; ++a) same = same && r.out[a] == r.out[0];
  r.outputs_match = same;
  return r;
}

}  // namespace tpserve::bench
