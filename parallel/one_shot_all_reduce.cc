#include "parallel/one_shot_all_reduce.h"

#include <vector>

#include "common/cuda_check.h"
#include "common/error.h"
#include "common/log.h"
#include "common/mpi_check.h"
#include "kernels/one_shot_all_reduce.h"

namespace tpserve::parallel {
namespace {

struct IpcHandles {
  cudaIpcMemHandle_t buffer;
  cudaIpcMemHandle_t flags;
  int device;
};

class OneShotAllReduceImpl final : public OneShotAllReduce {
 public:
  OneShotAllReduceImpl(MPI_Comm group, int device, const kernels::LaunchPolicy& policy) : policy_(policy) {
    int rank = 0, ranks = 1;
    MPI_CHECK(MPI_Comm_rank(group, &rank));
    MPI_CHECK(MPI_Comm_size(group, &ranks));
    TPS_CHECK(ranks <= kernels::kOneShotMaxRanks, "parallel.all_reduce: one_shot supports up to ",
              kernels::kOneShotMaxRanks, " ranks, not ", ranks);
    MPI_Comm local = MPI_COMM_NULL;
    MPI_CHECK(MPI_Comm_split_type(group, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local));
    int local_size = 0;
    MPI_CHECK(MPI_Comm_size(local, &local_size));
    MPI_CHECK(MPI_Comm_free(&local));
    TPS_CHECK(local_size == ranks, "parallel.all_reduce: one_shot needs every rank on one host (", local_size,
              " of ", ranks, " here): use nccl");

    CUDA_CHECK(cudaSetDevice(device));
    CUDA_CHECK(cudaMalloc(&buffer_, kernels::kOneShotBufferBytes));
    CUDA_CHECK(cudaMalloc(&flags_, kernels::kOneShotFlagsBytes));
    CUDA_CHECK(cudaMalloc(&counters_, kernels::kOneShotCountersBytes));
    CUDA_CHECK(cudaMemset(flags_, 0, kernels::kOneShotFlagsBytes));
    CUDA_CHECK(cudaMemset(counters_, 0, kernels::kOneShotCountersBytes));
    CUDA_CHECK(cudaDeviceSynchronize());  // zeroed before any peer can signal

    IpcHandles mine{};
    CUDA_CHECK(cudaIpcGetMemHandle(&mine.buffer, buffer_));
    CUDA_CHECK(cudaIpcGetMemHandle(&mine.flags, flags_));
    mine.device = device;
    std::vector<IpcHandles> all(static_cast<size_t>(ranks));
    MPI_CHECK(
        MPI_Allgather(&mine, sizeof(IpcHandles), MPI_BYTE, all.data(), sizeof(IpcHandles), MPI_BYTE, group));

    // Peer access from this GPU to every other: checked before mapping, so the error names the pair.
    for (int r = 0; r < ranks; ++r) {
      if (r == rank) continue;
      int can = 0;
      CUDA_CHECK(cudaDeviceCanAccessPeer(&can, device, all[r].device));
      TPS_CHECK(can == 1, "parallel.all_reduce: one_shot needs peer access from GPU ", device, " to GPU ",
                all[r].device, " (rank ", r, "): use nccl");
    }
    params_.rank = rank;
    params_.ranks = ranks;
    params_.counters = static_cast<uint32_t*>(counters_);
    for (int r = 0; r < ranks; ++r) {
      if (r == rank) {
        params_.buffers[r] = buffer_;
        params_.flags[r] = static_cast<uint32_t*>(flags_);
        continue;
      }
      void* peer_buffer = nullptr;
      void* peer_flags = nullptr;
      CUDA_CHECK(cudaIpcOpenMemHandle(&peer_buffer, all[r].buffer, cudaIpcMemLazyEnablePeerAccess));
      opened_.push_back(peer_buffer);
      CUDA_CHECK(cudaIpcOpenMemHandle(&peer_flags, all[r].flags, cudaIpcMemLazyEnablePeerAccess));
      opened_.push_back(peer_flags);
      params_.buffers[r] = peer_buffer;
      params_.flags[r] = static_cast<uint32_t*>(peer_flags);
    }
    // Nobody signals before every rank has mapped and zeroed.
    MPI_CHECK(MPI_Barrier(group));
    log_info("one-shot all-reduce: ", ranks, " ranks over peer memory, up to ", kernels::kOneShotMaxBytes,
             " bytes a call (NCCL above)");
  }

  ~OneShotAllReduceImpl() override {
    for (void* p : opened_) cudaIpcCloseMemHandle(p);
    cudaFree(buffer_);
    cudaFree(flags_);
    cudaFree(counters_);
  }

  bool all_reduce_sum(void* data, size_t count, DType dtype, cudaStream_t stream) override {
    if (dtype != DType::kBF16 && dtype != DType::kF32) return false;
    if (count * dtype_size(dtype) > kernels::kOneShotMaxBytes) return false;
    kernels::OneShotAllReduceParams p = params_;
    p.data = data;
    p.count = static_cast<int64_t>(count);
    p.bf16 = dtype == DType::kBF16;
    kernels::launch_one_shot_all_reduce(p, stream, policy_);
    return true;
  }

 private:
  const kernels::LaunchPolicy& policy_;
  void* buffer_ = nullptr;
  void* flags_ = nullptr;
  void* counters_ = nullptr;
  std::vector<void*> opened_;
  kernels::OneShotAllReduceParams params_;
};

}  // namespace

std::unique_ptr<OneShotAllReduce> make_one_shot_all_reduce(MPI_Comm group, int device,
                                                           const kernels::LaunchPolicy& policy) {
  return std::make_unique<OneShotAllReduceImpl>(group, device, policy);
}

}  // namespace tpserve::parallel
