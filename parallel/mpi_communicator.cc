#include "parallel/mpi_communicator.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <thread>
#include <vector>

#include "common/error.h"
#include "common/mpi_check.h"

namespace tpserve::parallel {
namespace {

MPI_Datatype mpi_type(DType t) {
  switch (t) {
    case DType::kF32:
      return MPI_FLOAT;
    case DType::kF64:
      return MPI_DOUBLE;
    case DType::kI32:
      return MPI_INT32_T;
    case DType::kI64:
      return MPI_INT64_T;
    case DType::kU8:
      return MPI_UINT8_T;
    case DType::kI8:
      return MPI_INT8_T;
    default:
      TPS_THROW("MPI communicator: dtype ", dtype_name(t), " is not supported on the host data plane");
  }
}

// MPI counts are int: large messages are sent in chunks.
constexpr size_t kMaxChunk = size_t(1) << 30;

// Polls `request` to completion: at full speed for the first kSpin (a decode step's broadcasts follow each
// other within it, so no latency is added there), then sleeping between polls, 20 us doubling up to 200 us
// (after a pause, the first step reaches a follower up to about 200 us late for each level of the
// broadcast's tree, whose inner ranks forward it from their own polls).
constexpr auto kSpin = std::chrono::milliseconds(2);
constexpr auto kLongestPause = std::chrono::microseconds(200);
void wait_with_backoff(MPI_Request& request) {
  const auto start = std::chrono::steady_clock::now();
  auto pause = std::chrono::microseconds(20);
  for (;;) {
    int done = 0;
    MPI_CHECK(MPI_Test(&request, &done, MPI_STATUS_IGNORE));
    if (done) return;
    if (std::chrono::steady_clock::now() - start < kSpin) continue;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, kLongestPause);
  }
}

class MpiCommunicator final : public Communicator {
 public:
  explicit MpiCommunicator(MPI_Comm comm) {
    MPI_CHECK(MPI_Comm_dup(comm, &comm_));
    MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
    MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
    MPI_CHECK(MPI_Comm_size(comm_, &size_));
  }
  ~MpiCommunicator() override {
    // MPI_Comm_free is collective: while an exception unwinds (the other ranks may be waiting in a
    // collective) it would hang; the top level aborts every rank instead.
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized && std::uncaught_exceptions() == 0) MPI_Comm_free(&comm_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void all_reduce_sum(void* data, size_t count, DType dtype) override {
    const size_t es = dtype_size(dtype);
    for (size_t off = 0; off < count; off += kMaxChunk)
      MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, static_cast<char*>(data) + off * es,
                              static_cast<int>(std::min(kMaxChunk, count - off)), mpi_type(dtype), MPI_SUM,
                              comm_));
  }
  void all_gather(const void* send, void* recv, size_t count, DType dtype) override {
    TPS_CHECK(count < kMaxChunk, "all_gather of ", count, " elements");
    MPI_CHECK(MPI_Allgather(send, static_cast<int>(count), mpi_type(dtype), recv, static_cast<int>(count),
                            mpi_type(dtype), comm_));
  }
  void reduce_scatter_sum(const void* send, void* recv, size_t count, DType dtype) override {
    TPS_CHECK(count < kMaxChunk, "reduce_scatter of ", count, " elements");
    MPI_CHECK(MPI_Reduce_scatter_block(send, recv, static_cast<int>(count), mpi_type(dtype), MPI_SUM, comm_));
  }
  void all_to_all(const void* send, void* recv, size_t count, DType dtype) override {
    TPS_CHECK(count < kMaxChunk, "all_to_all of ", count, " elements per peer");
    MPI_CHECK(MPI_Alltoall(send, static_cast<int>(count), mpi_type(dtype), recv, static_cast<int>(count),
                           mpi_type(dtype), comm_));
  }
  // Nonblocking on every rank (a nonblocking collective matches only nonblocking ones), waited for with
  // wait_with_backoff: a follower rank waits here for rank 0's next step, which may be seconds away when the
  // server is idle, and MPI_Bcast's own wait spins a core all that time.
  void broadcast(void* data, size_t bytes, int root) override {
    for (size_t off = 0; off < bytes; off += kMaxChunk) {
      MPI_Request request = MPI_REQUEST_NULL;
      MPI_CHECK(MPI_Ibcast(static_cast<char*>(data) + off, static_cast<int>(std::min(kMaxChunk, bytes - off)),
                           MPI_BYTE, root, comm_, &request));
      wait_with_backoff(request);
    }
  }
  void barrier() override { MPI_CHECK(MPI_Barrier(comm_)); }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace

std::unique_ptr<Communicator> make_mpi_communicator(MPI_Comm comm) {
  return std::make_unique<MpiCommunicator>(comm);
}

}  // namespace tpserve::parallel
