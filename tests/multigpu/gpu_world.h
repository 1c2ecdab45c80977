// Multi-GPU tests: one process per GPU under mpirun. Whether this job can run them (every rank agrees, so
// that all skip together and none waits in a collective for a rank that skipped), and this rank's GPU.
#pragma once

#include <mpi.h>

#include <string>

#include "parallel/topology.h"
#include "runtime/backend/cuda/cuda_backend.h"

namespace tpserve::testing_util {

// Where this process sits (one group of all ranks). The first call is collective (every rank makes it, in
// multigpu_skip_reason); later calls return the cached answer, so one rank alone may ask.
inline const parallel::Topology& gpu_world_topology() {
  static const parallel::Topology topology = [] {
    int size = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    return parallel::discover_topology(size, 1);
  }();
  return topology;
}

// Collective. Empty when there are >= 2 ranks and every host has a GPU for each of its ranks; else why not.
inline std::string multigpu_skip_reason() {
  const parallel::Topology& t = gpu_world_topology();
  std::string why;
  const int devices = cuda_device_count(&why);
  const int enough = devices >= t.local_size ? 1 : 0;
  int all_enough = 0;
  MPI_Allreduce(&enough, &all_enough, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (t.world_size < 2) return "needs mpirun -np 2 or more (this job has 1 rank)";
  if (all_enough == 0)
    return "needs one GPU per rank: " + std::to_string(t.local_size) + " ranks on this host, " +
           std::to_string(devices) + " GPUs visible" + (why.empty() ? "" : " (" + why + ")");
  return "";
}

// This rank's GPU: its rank among the processes of its host (as tpserve picks it).
inline int local_gpu() {
  return gpu_world_topology().local_rank;
}

}  // namespace tpserve::testing_util

#define TPS_REQUIRE_MULTIGPU()                                                     \
  do {                                                                             \
    const std::string tps_skip_ = ::tpserve::testing_util::multigpu_skip_reason(); \
    if (!tps_skip_.empty()) GTEST_SKIP() << tps_skip_;                             \
  } while (0)
