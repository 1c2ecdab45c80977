// OneShotAllReduce: the buffers of the one-shot NVLink all-reduce (kernels/one_shot_all_reduce.h) for a group
// of ranks on one host, one GPU each: every rank allocates its staging buffer and flags, shares them over
// MPI as CUDA IPC handles, and maps its peers'. Construction is collective and ends alike on every rank:
// make_one_shot_all_reduce throws (naming why) when the group spans hosts, has more than 8 ranks, a pair of
// GPUs has no peer access (one_shot_all_reduce_supported says so beforehand, without throwing) or the CUDA
// setup fails on some rank; make_one_shot_all_reduce_if_supported returns nullptr instead
// (parallel.all_reduce: auto then takes NCCL).
#pragma once

#include <cuda_runtime_api.h>
#include <mpi.h>

#include <memory>
#include <string>

#include "common/dtype.h"

namespace tpserve::kernels {
class LaunchPolicy;
}

namespace tpserve::parallel {

class OneShotAllReduce {
 public:
  virtual ~OneShotAllReduce() = default;
  // Enqueues the in-place sum on `stream` and returns true, or returns false (nothing enqueued) when the
  // message is too large or of a type it does not sum (the caller uses NCCL then). Every rank decides alike.
  virtual bool all_reduce_sum(void* data, size_t count, DType dtype, cudaStream_t stream) = 0;
  // The sum of bf16 rows data [tokens, hidden], then residual += data and out = w * rmsnorm(residual), in one
  // kernel (kernels/one_shot_all_reduce.h); false (nothing enqueued) when the rows do not fit.
  virtual bool all_reduce_add_rmsnorm(void* data, void* residual, const void* weight, void* out, int tokens,
                                      int hidden, float eps, cudaStream_t stream) = 0;
};

// Collective over `group` (`device`: this rank's GPU). True when the group is at most kOneShotMaxRanks ranks,
// all on one host, with peer access between every pair of their GPUs; else false with the reason in *why.
// Every rank gets the same answer and reason (the lowest rank that cannot use it gives the reason).
bool one_shot_all_reduce_supported(MPI_Comm group, int device, std::string* why);

// Collective setup (buffers, IPC handles shared over MPI, peers mapped). Where any rank's CUDA setup fails
// (e.g. CUDA IPC not allowed), every rank returns nullptr with the first failing rank's error in *why.
// Does not run the probe above.
std::unique_ptr<OneShotAllReduce> try_make_one_shot_all_reduce(MPI_Comm group, int device,
                                                               const kernels::LaunchPolicy& policy,
                                                               std::string* why);
// The probe, then the setup: nullptr on every rank alike (with the reason in *why) where either says no
// (parallel.all_reduce: auto).
std::unique_ptr<OneShotAllReduce> make_one_shot_all_reduce_if_supported(MPI_Comm group, int device,
                                                                        const kernels::LaunchPolicy& policy,
                                                                        std::string* why);
// The same, throwing on every rank alike (with the reason) where it would return nullptr.
std::unique_ptr<OneShotAllReduce> make_one_shot_all_reduce(MPI_Comm group, int device,
                                                           const kernels::LaunchPolicy& policy);

}  // namespace tpserve::parallel
