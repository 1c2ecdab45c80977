// NcclCommunicator: the Communicator on device memory over NCCL, enqueued on the backend's CUDA stream (so
// that the collectives are captured with the rest of a decode step's graph). Bootstrapped over MPI:
// rank 0 creates the NCCL id, MPI_Bcast shares it. Asynchronous NCCL errors are surfaced by check_health(),
// which the step's wait loop polls; abort() tears the communicator down so no rank waits forever.
#pragma once

#include <cuda_runtime_api.h>
#include <mpi.h>

#include <memory>

#include "parallel/communicator.h"
#include "parallel/one_shot_all_reduce.h"

namespace tpserve::parallel {

class NcclCommunicator : public Communicator {
 public:
  virtual ~NcclCommunicator() = default;
  // Throws tpserve::Error when NCCL reported an asynchronous error (after aborting the communicator).
  virtual void check_health() = 0;
  virtual void abort() = 0;
  // From now on, sums that fit go through the one-shot NVLink kernel instead of ncclAllReduce (every rank
  // must make the same call).
  virtual void use_one_shot_all_reduce(std::unique_ptr<OneShotAllReduce> one_shot) = 0;
};

// `device` is the CUDA device of this rank (already current or made current here); `stream` the stream
// every collective is enqueued on.
std::unique_ptr<NcclCommunicator> make_nccl_communicator(MPI_Comm group, int device, cudaStream_t stream);

}  // namespace tpserve::parallel
