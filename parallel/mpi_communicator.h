// MpiCommunicator: the Communicator on host memory over an MPI communicator (the CPU backend's data plane,
// and the reference the NCCL communicator is tested against).
#pragma once

#include <mpi.h>

#include <memory>

#include "parallel/communicator.h"

namespace tpserve::parallel {

// Wraps `comm` (duplicated, so that tpserve's traffic never mixes with anyone else's).
std::unique_ptr<Communicator> make_mpi_communicator(MPI_Comm comm);

}  // namespace tpserve::parallel
