#include "parallel/topology.h"

#include <mpi.h>

#include "common/error.h"
#include "common/mpi_check.h"

namespace tpserve::parallel {

std::string Topology::describe() const {
  return "rank " + std::to_string(world_rank) + "/" + std::to_string(world_size) + " (local " +
         std::to_string(local_rank) + "/" + std::to_string(local_size) + " on one of " +
         std::to_string(num_hosts) + " hosts), tp " + std::to_string(tp_rank) + "/" +
         std::to_string(tp_size) + ", ep " + std::to_string(ep_rank) + "/" + std::to_string(ep_size);
}

void validate_topology(int world_size, int tp, int ep) {
  TPS_CHECK(tp == world_size, "parallel.tp=", tp, " but mpirun started ", world_size,
            " processes: start one process per tensor-parallel rank (mpirun -np ", tp, ")");
  TPS_CHECK(ep == 1 || ep == world_size, "parallel.ep=", ep, " must be 1 or the number of processes (",
            world_size, ")");
}

Topology discover_topology(int tp, int ep) {
  Topology t;
  MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &t.world_rank));
  MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &t.world_size));
  validate_topology(t.world_size, tp, ep);
  MPI_Comm local = MPI_COMM_NULL;
  MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, t.world_rank, MPI_INFO_NULL, &local));
  MPI_CHECK(MPI_Comm_rank(local, &t.local_rank));
  MPI_CHECK(MPI_Comm_size(local, &t.local_size));
  // Hosts = number of local groups: count the local leaders.
  const int leader = t.local_rank == 0 ? 1 : 0;
  MPI_CHECK(MPI_Allreduce(&leader, &t.num_hosts, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
  MPI_CHECK(MPI_Comm_free(&local));
  t.tp_rank = t.world_rank, t.tp_size = tp;
  t.ep_rank = ep > 1 ? t.world_rank : 0, t.ep_size = ep;
  return t;
}

}  // namespace tpserve::parallel
