#include "runtime/tools/runtime_setup.h"

#include <mpi.h>

#include "common/log.h"
#include "parallel/mpi_communicator.h"

namespace tpserve {

RuntimeSetup::RuntimeSetup(const Config& config) : config_(config) {
  topology_ = parallel::discover_topology(config.parallel.tp, config.parallel.ep);
  log_info("topology: ", topology_.describe());
  world_ = topology_.world_size > 1 ? parallel::make_mpi_communicator(MPI_COMM_WORLD)
                                    : parallel::make_single_rank_communicator();
}

std::unique_ptr<Backend> RuntimeSetup::make_backend() {
  const BackendKind kind = config_.runtime.backend;
  if (kind == BackendKind::kCuda)
    TPS_THROW("runtime.backend: cuda is not available in this build yet; use cpu or auto");
  if (kind == BackendKind::kAuto) log_info("runtime.backend auto: using the CPU reference backend");
  return make_cpu_backend();
}

}  // namespace tpserve
