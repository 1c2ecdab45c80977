#include "parallel/nccl_communicator.h"

#include <nccl.h>

#include <exception>

#include "common/cuda_check.h"
#include "common/error.h"
#include "common/log.h"
#include "common/mpi_check.h"
#include "common/nccl_check.h"

namespace tpserve::parallel {
namespace {

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::kF32:
      return ncclFloat32;
    case DType::kBF16:
      return ncclBfloat16;
    case DType::kF16:
      return ncclFloat16;
    case DType::kI32:
      return ncclInt32;
    case DType::kI64:
      return ncclInt64;
    case DType::kU8:
      return ncclUint8;
    case DType::kI8:
      return ncclInt8;
    case DType::kF64:
      return ncclFloat64;
    default:
      TPS_THROW("NCCL communicator: dtype ", dtype_name(t), " is not supported");
  }
}

class NcclCommunicatorImpl final : public NcclCommunicator {
 public:
  NcclCommunicatorImpl(MPI_Comm group, int device, cudaStream_t stream) : stream_(stream) {
    MPI_CHECK(MPI_Comm_rank(group, &rank_));
    MPI_CHECK(MPI_Comm_size(group, &size_));
    ncclUniqueId id{};
    if (rank_ == 0) NCCL_CHECK(ncclGetUniqueId(&id));
    MPI_CHECK(MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, group));
    CUDA_CHECK(cudaSetDevice(device));
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 1;
    NCCL_CHECK(ncclCommInitRankConfig(&comm_, size_, id, rank_, &config));
    CUDA_CHECK(cudaMalloc(&scratch_, sizeof(float)));
    log_info("NCCL ", NCCL_MAJOR, ".", NCCL_MINOR, " communicator: rank ", rank_, "/", size_, " on device ",
             device);
  }

  ~NcclCommunicatorImpl() override {
    // Destroy waits for peers; while an exception unwinds, abort instead so that this rank reaches MPI_Abort.
    // After abort() there is no communicator left, only the scratch word.
    if (comm_ != nullptr) {
      if (std::uncaught_exceptions() > 0)
        ncclCommAbort(comm_);
      else
        ncclCommDestroy(comm_);
    }
    cudaFree(scratch_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void all_reduce_sum(void* data, size_t count, DType dtype) override {
    if (one_shot_ != nullptr && one_shot_->all_reduce_sum(data, count, dtype, stream_)) return;
    NCCL_CHECK(ncclAllReduce(data, data, count, nccl_type(dtype), ncclSum, comm_, stream_));
  }
  bool all_reduce_add_rmsnorm(void* data, void* residual, const void* weight, void* out, int tokens,
                              int hidden, float eps) override {
    return one_shot_ != nullptr &&
           one_shot_->all_reduce_add_rmsnorm(data, residual, weight, out, tokens, hidden, eps, stream_);
  }
  void all_gather(const void* send, void* recv, size_t count, DType dtype) override {
    NCCL_CHECK(ncclAllGather(send, recv, count, nccl_type(dtype), comm_, stream_));
  }
  void reduce_scatter_sum(const void* send, void* recv, size_t count, DType dtype) override {
    NCCL_CHECK(ncclReduceScatter(send, recv, count, nccl_type(dtype), ncclSum, comm_, stream_));
  }
  void all_to_all(const void* send, void* recv, size_t count, DType dtype) override {
    NCCL_CHECK(ncclAlltoAll(send, recv, count, nccl_type(dtype), comm_, stream_));
  }
  void broadcast(void* data, size_t bytes, int root) override {
    NCCL_CHECK(ncclBroadcast(data, data, bytes, ncclUint8, root, comm_, stream_));
  }
  void barrier() override {
    NCCL_CHECK(ncclAllReduce(scratch_, scratch_, 1, ncclFloat32, ncclSum, comm_, stream_));
    CUDA_CHECK(cudaStreamSynchronize(stream_));
  }

  void check_health() override {
    ncclResult_t async = ncclSuccess;
    NCCL_CHECK(ncclCommGetAsyncError(comm_, &async));
    if (async != ncclSuccess && async != ncclInProgress) {
      const std::string text = nccl_error_text(async, comm_);
      abort();
      TPS_THROW("NCCL asynchronous error on rank ", rank_, ": ", text);
    }
  }

  void use_one_shot_all_reduce(std::unique_ptr<OneShotAllReduce> one_shot) override {
    one_shot_ = std::move(one_shot);
  }

  void abort() override {
    if (comm_ != nullptr) ncclCommAbort(comm_);
    comm_ = nullptr;
  }

 private:
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_;
  int rank_ = 0;
  int size_ = 1;
  void* scratch_ = nullptr;
  std::unique_ptr<OneShotAllReduce> one_shot_;
};

}  // namespace

std::unique_ptr<NcclCommunicator> make_nccl_communicator(MPI_Comm group, int device, cudaStream_t stream) {
  return std::make_unique<NcclCommunicatorImpl>(group, device, stream);
}

}  // namespace tpserve::parallel
