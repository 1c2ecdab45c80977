// Communicator: the collectives tensor and expert parallelism need, on buffers in the memory of the
// backend in use (host memory for the MPI implementation, device memory for NCCL). Counts are elements.
// Every rank of the group must call the same collectives in the same order.
#pragma once

#include <cstddef>
#include <memory>

#include "common/dtype.h"

namespace tpserve::parallel {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // In place: data = sum over ranks of data.
  virtual void all_reduce_sum(void* data, size_t count, DType dtype) = 0;
  // all_reduce_sum of bf16 rows data [tokens, hidden], then residual += data and out = w * x / rms(x) of the
  // new residual (Backend::add_rmsnorm), fused where the implementation can; returns false, doing nothing,
  // where it cannot (the caller then runs the two steps).
  virtual bool all_reduce_add_rmsnorm(void* /*data*/, void* /*residual*/, const void* /*weight*/,
                                      void* /*out*/, int /*tokens*/, int /*hidden*/, float /*eps*/) {
    return false;
  }
  // recv[r * count + i] = send_of_rank_r[i].
  virtual void all_gather(const void* send, void* recv, size_t count, DType dtype) = 0;
  // recv[i] = sum over ranks of send_of_rank_r[rank * count + i].
  virtual void reduce_scatter_sum(const void* send, void* recv, size_t count, DType dtype) = 0;
  // Fixed-capacity exchange: send[p * count ...] goes to peer p, recv[p * count ...] comes from peer p.
  // Buffers are sized for the worst case, so shapes never depend on the data (counts travel inside).
  virtual void all_to_all(const void* send, void* recv, size_t count, DType dtype) = 0;
  virtual void broadcast(void* data, size_t bytes, int root) = 0;
  virtual void barrier() = 0;
};

// The group of one: every collective is a copy (or nothing).
std::unique_ptr<Communicator> make_single_rank_communicator();

}  // namespace tpserve::parallel
