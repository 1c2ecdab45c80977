#include "parallel/one_shot_all_reduce.h"

#include <array>
#include <string>
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
};

// Every rank's `error` ("" = fine) becomes one answer: true everywhere, or false everywhere with the lowest
// failing rank's error in *why. Ranks that took different paths would wait in each other's collectives.
bool agree(MPI_Comm group, const std::string& error, std::string* why) {
  int rank = 0;
  MPI_CHECK(MPI_Comm_rank(group, &rank));
  struct {
    int ok;
    int rank;
  } mine{error.empty() ? 1 : 0, rank}, first{};
  MPI_CHECK(MPI_Allreduce(&mine, &first, 1, MPI_2INT, MPI_MINLOC, group));
  if (first.ok == 1) return true;
  std::array<char, 256> text{};
  error.copy(text.data(), text.size() - 1);
  MPI_CHECK(MPI_Bcast(text.data(), static_cast<int>(text.size()), MPI_CHAR, first.rank, group));
  if (why != nullptr) *why = text.data();
  return false;
}

// Runs a setup step's local CUDA work; returns its error ("" = fine), with CUDA's last error cleared.
template <typename Step>
std::string local_error(Step step) {
  try {
    step();
    return "";
  } catch (const std::exception& e) {
    cudaGetLastError();
    return std::string("rank setup failed: ") + e.what();
  }
}

class OneShotAllReduceImpl final : public OneShotAllReduce {
 public:
  explicit OneShotAllReduceImpl(const kernels::LaunchPolicy& policy) : policy_(policy) {}

  // Collective. Each stage's local CUDA work may fail on some rank; the ranks agree after every stage, so
  // that all of them return the object or all return nullptr (with the reason), never a split.
  static std::unique_ptr<OneShotAllReduceImpl> create(MPI_Comm group, int device,
                                                      const kernels::LaunchPolicy& policy, std::string* why) {
    int rank = 0, ranks = 1;
    MPI_CHECK(MPI_Comm_rank(group, &rank));
    MPI_CHECK(MPI_Comm_size(group, &ranks));
    auto impl = std::make_unique<OneShotAllReduceImpl>(policy);
    IpcHandles mine{};
    if (!agree(group, local_error([&] { impl->allocate(device, mine); }), why)) return nullptr;
    std::vector<IpcHandles> all(static_cast<size_t>(ranks));
    MPI_CHECK(
        MPI_Allgather(&mine, sizeof(IpcHandles), MPI_BYTE, all.data(), sizeof(IpcHandles), MPI_BYTE, group));
    if (!agree(group, local_error([&] { impl->map_peers(all, rank, ranks); }), why)) return nullptr;
    // Nobody signals before every rank has mapped and zeroed.
    MPI_CHECK(MPI_Barrier(group));
    log_info("one-shot all-reduce: ", ranks, " ranks over peer memory, up to ", kernels::kOneShotMaxBytes,
             " bytes a call (NCCL above)");
    return impl;
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

  bool all_reduce_add_rmsnorm(void* data, void* residual, const void* weight, void* out, int tokens,
                              int hidden, float eps, cudaStream_t stream) override {
    if (!kernels::one_shot_add_rmsnorm_fits(tokens, hidden)) return false;
    kernels::OneShotAllReduceParams p = params_;
    p.data = data;
    p.count = static_cast<int64_t>(tokens) * hidden;
    p.bf16 = true;
    kernels::OneShotAddRmsNormParams n;
    n.residual = static_cast<kernels::bf16*>(residual);
    n.weight = static_cast<const kernels::bf16*>(weight);
    n.out = static_cast<kernels::bf16*>(out);
    n.tokens = tokens;
    n.hidden = hidden;
    n.eps = eps;
    kernels::launch_one_shot_all_reduce_add_rmsnorm(p, n, stream, policy_);
    return true;
  }

 private:
  // This rank's staging buffer, flags and counters, zeroed, and the IPC handles of the first two.
  void allocate(int device, IpcHandles& mine) {
    CUDA_CHECK(cudaSetDevice(device));
    CUDA_CHECK(cudaMalloc(&buffer_, kernels::kOneShotBufferBytes));
    CUDA_CHECK(cudaMalloc(&flags_, kernels::kOneShotFlagsBytes));
    CUDA_CHECK(cudaMalloc(&counters_, kernels::kOneShotCountersBytes));
    CUDA_CHECK(cudaMemset(flags_, 0, kernels::kOneShotFlagsBytes));
    CUDA_CHECK(cudaMemset(counters_, 0, kernels::kOneShotCountersBytes));
    CUDA_CHECK(cudaDeviceSynchronize());  // zeroed before any peer can signal
    CUDA_CHECK(cudaIpcGetMemHandle(&mine.buffer, buffer_));
    CUDA_CHECK(cudaIpcGetMemHandle(&mine.flags, flags_));
  }

  // Maps every peer's buffer and flags (this rank's own where r == rank).
  void map_peers(const std::vector<IpcHandles>& all, int rank, int ranks) {
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
  }

  const kernels::LaunchPolicy& policy_;
  void* buffer_ = nullptr;
  void* flags_ = nullptr;
  void* counters_ = nullptr;
  std::vector<void*> opened_;
  kernels::OneShotAllReduceParams params_;
};

// Why this rank cannot use the one-shot all-reduce (empty: it can). `devices`: every rank's GPU.
std::string local_obstacle(int rank, int ranks, int local_size, const std::vector<int>& devices) {
  if (ranks > kernels::kOneShotMaxRanks)
    return "supports up to " + std::to_string(kernels::kOneShotMaxRanks) + " ranks, not " +
           std::to_string(ranks);
  if (local_size != ranks)
    return "needs every rank on one host (" + std::to_string(local_size) + " of " + std::to_string(ranks) +
           " here)";
  for (int r = 0; r < ranks; ++r) {
    if (r == rank) continue;
    int can = 0;
    const cudaError_t e = cudaDeviceCanAccessPeer(&can, devices[rank], devices[r]);
    if (e != cudaSuccess) cudaGetLastError();  // clear it: a failed query only means "no"
    if (e != cudaSuccess || can != 1)
      return "needs peer access from GPU " + std::to_string(devices[rank]) + " (rank " +
             std::to_string(rank) + ") to GPU " + std::to_string(devices[r]) + " (rank " + std::to_string(r) +
             ")" + (e != cudaSuccess ? std::string(": ") + cudaGetErrorString(e) : "");
  }
  return "";
}

}  // namespace

bool one_shot_all_reduce_supported(MPI_Comm group, int device, std::string* why) {
  int rank = 0, ranks = 1, local_size = 0;
  MPI_CHECK(MPI_Comm_rank(group, &rank));
  MPI_CHECK(MPI_Comm_size(group, &ranks));
  MPI_Comm local = MPI_COMM_NULL;
  MPI_CHECK(MPI_Comm_split_type(group, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local));
  MPI_CHECK(MPI_Comm_size(local, &local_size));
  MPI_CHECK(MPI_Comm_free(&local));
  std::vector<int> devices(static_cast<size_t>(ranks));
  MPI_CHECK(MPI_Allgather(&device, 1, MPI_INT, devices.data(), 1, MPI_INT, group));
  return agree(group, local_obstacle(rank, ranks, local_size, devices), why);
}

std::unique_ptr<OneShotAllReduce> try_make_one_shot_all_reduce(MPI_Comm group, int device,
                                                               const kernels::LaunchPolicy& policy,
                                                               std::string* why) {
  return OneShotAllReduceImpl::create(group, device, policy, why);
}

std::unique_ptr<OneShotAllReduce> make_one_shot_all_reduce_if_supported(MPI_Comm group, int device,
                                                                        const kernels::LaunchPolicy& policy,
                                                                        std::string* why) {
  if (!one_shot_all_reduce_supported(group, device, why)) return nullptr;
  return try_make_one_shot_all_reduce(group, device, policy, why);
}

std::unique_ptr<OneShotAllReduce> make_one_shot_all_reduce(MPI_Comm group, int device,
                                                           const kernels::LaunchPolicy& policy) {
  std::string why;
  std::unique_ptr<OneShotAllReduce> one_shot =
      make_one_shot_all_reduce_if_supported(group, device, policy, &why);
  if (one_shot == nullptr) TPS_THROW("parallel.all_reduce: one_shot ", why, ": use nccl");
  return one_shot;
}

}  // namespace tpserve::parallel
