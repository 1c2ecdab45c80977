// Topology: where this process sits in the job. World rank and size from MPI, the local rank among the
// processes of the same host (MPI_Comm_split_type shared) that picks the GPU, and the tensor- and
// expert-parallel groups. tpserve runs one group for both: tp == world size, ep == 1 or the world size.
#pragma once

#include <string>

namespace tpserve::parallel {

struct Topology {
  int world_rank = 0;
  int world_size = 1;
  int local_rank = 0;  // rank among the processes on this host
  int local_size = 1;
  int num_hosts = 1;
  int tp_rank = 0;
  int tp_size = 1;
  int ep_rank = 0;
  int ep_size = 1;

  std::string describe() const;
};

// From MPI_COMM_WORLD (MPI must be initialised). Throws tpserve::Error when tp/ep do not fit the world.
Topology discover_topology(int tp, int ep);
// The checks alone, for any world size (unit-tested without MPI).
void validate_topology(int world_size, int tp, int ep);

}  // namespace tpserve::parallel
