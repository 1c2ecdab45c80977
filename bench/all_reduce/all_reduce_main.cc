// bench/all_reduce: NCCL's all-reduce against the one-shot NVLink all-reduce per message size, one process
// per GPU under mpirun (e.g. mpirun -np 2 build/bench/all_reduce). For each size (bf16), each
// implementation's graph of --calls back-to-back in-place sums is replayed in A/B/B/A rounds; the table gives
// the median us per call, the paired difference and the share of rounds it held.
#include <cuda_runtime_api.h>
#include <mpi.h>
#include <CLI/CLI.hpp>

#include <cstdio>
#include <vector>

#include "bench/common/arm_schedule.h"
#include "bench/common/sample_stats.h"
#include "common/cuda_check.h"
#include "common/error.h"
#include "common/log.h"
#include "common/mpi_check.h"
#include "kernels/launch.h"
#include "parallel/mpi_session.h"
#include "parallel/nccl_communicator.h"
#include "parallel/topology.h"
#include "runtime/tools/main_guard.h"

namespace tpserve::bench {
namespace {

struct Options {
  std::vector<size_t> sizes = {2048, 4096, 8192, 16384, 32768, 65536, 131072, 262144, 524288, 1048576};
  int calls = 50;   // all-reduces per graph
  int rounds = 8;   // A/B/B/A rounds
  int replays = 5;  // graph replays timed per round
};

// One implementation's graph of `calls` in-place sums of `count` bf16 on `data`.
cudaGraphExec_t capture(parallel::Communicator& comm, void* data, size_t count, int calls, cudaStream_t s) {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < calls; ++i) comm.all_reduce_sum(data, count, DType::kBF16);
  CUDA_CHECK(cudaStreamEndCapture(s, &graph));
  CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  CUDA_CHECK(cudaGraphDestroy(graph));
  return exec;
}

// us per call over `replays` replays (all ranks replay together: a barrier first).
double time_us(cudaGraphExec_t exec, int calls, int replays, cudaStream_t s, cudaEvent_t a, cudaEvent_t b) {
  CUDA_CHECK(cudaStreamSynchronize(s));
  MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
  CUDA_CHECK(cudaEventRecord(a, s));
  for (int r = 0; r < replays; ++r) CUDA_CHECK(cudaGraphLaunch(exec, s));
  CUDA_CHECK(cudaEventRecord(b, s));
  CUDA_CHECK(cudaEventSynchronize(b));
  float ms = 0;
  CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
  return 1000.0 * ms / (static_cast<double>(replays) * calls);
}

int run(int argc, char** argv) {
  Options o;
  CLI::App app{"all_reduce: NCCL vs the one-shot NVLink all-reduce per message size (run under mpirun)"};
  app.add_option("--sizes", o.sizes, "message sizes in bytes (bf16)")->delimiter(',');
  app.add_option("--calls", o.calls, "all-reduces per captured graph")->capture_default_str();
  app.add_option("--rounds", o.rounds, "A/B/B/A rounds")->capture_default_str();
  app.add_option("--replays", o.replays, "graph replays timed per round")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  parallel::MpiSession mpi(&argc, &argv);
  int size = 1;
  MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  const parallel::Topology t = parallel::discover_topology(size, 1);
  set_log_rank(t.world_rank);
  TPS_CHECK(size >= 2, "all_reduce: start it with mpirun -np 2 or more");
  const int device = t.local_rank;
  CUDA_CHECK(cudaSetDevice(device));
  cudaStream_t s = nullptr;
  CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  kernels::LaunchPolicy policy;
  auto nccl = parallel::make_nccl_communicator(MPI_COMM_WORLD, device, s);
  auto one_shot = parallel::make_nccl_communicator(MPI_COMM_WORLD, device, s);
  one_shot->use_one_shot_all_reduce(parallel::make_one_shot_all_reduce(MPI_COMM_WORLD, device, policy));
  cudaEvent_t a = nullptr, b = nullptr;
  CUDA_CHECK(cudaEventCreate(&a));
  CUDA_CHECK(cudaEventCreate(&b));

  if (t.world_rank == 0)
    std::printf("%10s %14s %14s %16s %8s %6s\n", "bytes", "nccl us/call", "one-shot us", "diff (os-nccl)",
                "rel %", "sign");
  for (const size_t bytes : o.sizes) {
    const size_t count = bytes / 2;
    void* data = nullptr;
    CUDA_CHECK(cudaMalloc(&data, bytes));
    CUDA_CHECK(cudaMemset(data, 0, bytes));  // sums of zeros stay finite however often they run
    cudaGraphExec_t graphs[2] = {capture(*nccl, data, count, o.calls, s),
                                 capture(*one_shot, data, count, o.calls, s)};
    for (cudaGraphExec_t g : graphs) time_us(g, o.calls, 1, s, a, b);  // warm-up
    std::vector<double> us[2] = {std::vector<double>(o.rounds), std::vector<double>(o.rounds)};
    for (int round = 0; round < o.rounds; ++round)
      for (const int arm : arm_order(2, round))
        us[arm][round] = time_us(graphs[arm], o.calls, o.replays, s, a, b);
    const PairedDifference d = paired_difference(us[0], us[1]);
    if (t.world_rank == 0)
      std::printf("%10zu %14.2f %14.2f %16.2f %8.1f %3d/%d\n", bytes, median(us[0]), median(us[1]), d.median,
                  100.0 * d.relative(), d.sign_held, d.rounds);
    for (cudaGraphExec_t g : graphs) CUDA_CHECK(cudaGraphExecDestroy(g));
    CUDA_CHECK(cudaFree(data));
  }
  one_shot.reset();
  nccl.reset();
  CUDA_CHECK(cudaEventDestroy(a));
  CUDA_CHECK(cudaEventDestroy(b));
  CUDA_CHECK(cudaStreamDestroy(s));
  return 0;
}

}  // namespace
}  // namespace tpserve::bench

int main(int argc, char** argv) {
  return tpserve::run_guarded([&] { return tpserve::bench::run(argc, argv); });
}
