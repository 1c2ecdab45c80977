// The NCCL communicator's collectives on device memory against the MPI communicator on the same (random)
// data in host memory: f32 and bf16, an odd element count, eagerly and captured in a CUDA graph that is
// replayed with fresh inputs (as the decode step's graph replays them).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "common/cuda_check.h"
#include "common/dtype.h"
#include "common/error.h"
#include "kernels/launch.h"
#include "kernels/rmsnorm.h"
#include "parallel/mpi_communicator.h"
#include "parallel/nccl_communicator.h"
#include "tests/multigpu/gpu_world.h"
#include "tests/parallel/mpi_test_env.h"

namespace tpserve {
namespace {

using namespace testing_util;

constexpr size_t kCount = 4099;  // elements per rank (per peer for all-to-all)

// Values a bf16 holds exactly, so host and device start from the same numbers in either dtype.
std::vector<float> random_values(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-2, 2);
  std::vector<float> v(n);
  for (auto& x : v) x = bf16_to_f32(f32_to_bf16(u(rng)));
  return v;
}

// A device buffer holding f32 values as `dtype`, and back.
class DeviceBuffer {
 public:
  DeviceBuffer(size_t n, DType dtype) : n_(n), dtype_(dtype) {
    CUDA_CHECK(cudaMalloc(&p_, n * dtype_size(dtype)));
  }
  ~DeviceBuffer() { cudaFree(p_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* data() { return p_; }
  void upload(const std::vector<float>& v, cudaStream_t s) {
    if (dtype_ == DType::kF32) {
      CUDA_CHECK(cudaMemcpyAsync(p_, v.data(), n_ * 4, cudaMemcpyHostToDevice, s));
    } else {
      staged_.resize(n_);
      for (size_t i = 0; i < n_; ++i) staged_[i] = f32_to_bf16(v[i]);
      CUDA_CHECK(cudaMemcpyAsync(p_, staged_.data(), n_ * 2, cudaMemcpyHostToDevice, s));
    }
    CUDA_CHECK(cudaStreamSynchronize(s));
  }
  std::vector<float> download(cudaStream_t s) {
    std::vector<float> v(n_);
    if (dtype_ == DType::kF32) {
      CUDA_CHECK(cudaMemcpyAsync(v.data(), p_, n_ * 4, cudaMemcpyDeviceToHost, s));
      CUDA_CHECK(cudaStreamSynchronize(s));
    } else {
      staged_.resize(n_);
      CUDA_CHECK(cudaMemcpyAsync(staged_.data(), p_, n_ * 2, cudaMemcpyDeviceToHost, s));
      CUDA_CHECK(cudaStreamSynchronize(s));
      for (size_t i = 0; i < n_; ++i) v[i] = bf16_to_f32(staged_[i]);
    }
    return v;
  }

 private:
  size_t n_;
  DType dtype_;
  void* p_ = nullptr;
  std::vector<uint16_t> staged_;
};

// Sums of bf16 are rounded once per addition: allow one bf16 ulp per rank beyond f32's result.
void expect_near(const std::vector<float>& got, const std::vector<float>& want, DType dtype, int ranks,
                 const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  const float rtol = dtype == DType::kF32 ? 1e-6f : ranks * std::ldexp(1.0f, -8);
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(got[i] - want[i]) <= 1e-6f + rtol * std::fabs(want[i])) && bad++ < 3)
      ADD_FAILURE() << what << " [" << i << "]: " << got[i] << " vs " << want[i];
  EXPECT_EQ(bad, 0u) << what;
}

void expect_same(const std::vector<float>& got, const std::vector<float>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != want[i] && bad++ < 3)
      ADD_FAILURE() << what << " [" << i << "]: " << got[i] << " vs " << want[i];
  EXPECT_EQ(bad, 0u) << what;
}

class NcclCollectives : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    TPS_REQUIRE_MULTIGPU();
    CUDA_CHECK(cudaSetDevice(local_gpu()));
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    nccl_ = parallel::make_nccl_communicator(MPI_COMM_WORLD, local_gpu(), stream_);
    mpi_ = parallel::make_mpi_communicator(MPI_COMM_WORLD);
  }
  void TearDown() override {
    nccl_.reset();
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  // Runs every collective once on the NCCL communicator (enqueue only) over the given buffers.
  void enqueue_all(DeviceBuffer& sum, DeviceBuffer& gather_in, DeviceBuffer& gather_out, DeviceBuffer& rs_in,
                   DeviceBuffer& rs_out, DeviceBuffer& a2a_in, DeviceBuffer& a2a_out, DType dtype) {
    nccl_->all_reduce_sum(sum.data(), kCount, dtype);
    nccl_->all_gather(gather_in.data(), gather_out.data(), kCount, dtype);
    nccl_->reduce_scatter_sum(rs_in.data(), rs_out.data(), kCount, dtype);
    nccl_->all_to_all(a2a_in.data(), a2a_out.data(), kCount, dtype);
  }

  cudaStream_t stream_ = nullptr;
  std::unique_ptr<parallel::NcclCommunicator> nccl_;
  std::unique_ptr<parallel::Communicator> mpi_;
};

TEST_P(NcclCollectives, MatchMpiEagerAndInAGraph) {
  const DType dtype = GetParam();
  const int p = world_size(), r = world_rank();
  DeviceBuffer sum(kCount, dtype), gather_in(kCount, dtype), gather_out(kCount * p, dtype),
      rs_in(kCount * p, dtype), rs_out(kCount, dtype), a2a_in(kCount * p, dtype), a2a_out(kCount * p, dtype);

  // Round 0 eager; rounds 1-3 replay one captured graph over the same buffers with fresh inputs.
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  for (int round = 0; round < 4; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    const unsigned seed = 100 * round + 10 * r;
    const auto v_sum = random_values(kCount, seed + 1), v_gather = random_values(kCount, seed + 2),
               v_rs = random_values(kCount * p, seed + 3), v_a2a = random_values(kCount * p, seed + 4);
    sum.upload(v_sum, stream_);
    gather_in.upload(v_gather, stream_);
    rs_in.upload(v_rs, stream_);
    a2a_in.upload(v_a2a, stream_);
    if (round == 0) {
      enqueue_all(sum, gather_in, gather_out, rs_in, rs_out, a2a_in, a2a_out, dtype);
    } else {
      if (exec == nullptr) {
        CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
        enqueue_all(sum, gather_in, gather_out, rs_in, rs_out, a2a_in, a2a_out, dtype);
        CUDA_CHECK(cudaStreamEndCapture(stream_, &graph));
        CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
      }
      CUDA_CHECK(cudaGraphLaunch(exec, stream_));
    }
    CUDA_CHECK(cudaStreamSynchronize(stream_));
    nccl_->check_health();

    // The same collectives over MPI on the host (f32; the inputs are exact in bf16).
    std::vector<float> want_sum = v_sum, want_gather(kCount * p), want_rs(kCount), want_a2a(kCount * p);
    mpi_->all_reduce_sum(want_sum.data(), kCount, DType::kF32);
    mpi_->all_gather(v_gather.data(), want_gather.data(), kCount, DType::kF32);
    mpi_->reduce_scatter_sum(v_rs.data(), want_rs.data(), kCount, DType::kF32);
    mpi_->all_to_all(v_a2a.data(), want_a2a.data(), kCount, DType::kF32);
    expect_near(sum.download(stream_), want_sum, dtype, p, "all_reduce_sum");
    expect_near(gather_out.download(stream_), want_gather, dtype, 0, "all_gather");
    expect_near(rs_out.download(stream_), want_rs, dtype, p, "reduce_scatter_sum");
    expect_near(a2a_out.download(stream_), want_a2a, dtype, 0, "all_to_all");
  }
  CUDA_CHECK(cudaGraphExecDestroy(exec));
  CUDA_CHECK(cudaGraphDestroy(graph));

  // Broadcast from the last rank, and the barrier.
  DeviceBuffer bytes(kCount, DType::kF32);
  const auto v_bcast = random_values(kCount, 7 + r);
  bytes.upload(v_bcast, stream_);
  nccl_->broadcast(bytes.data(), kCount * 4, p - 1);
  nccl_->barrier();
  expect_near(bytes.download(stream_), random_values(kCount, 7 + p - 1), DType::kF32, 0, "broadcast");
}

// The one-shot NVLink all-reduce behind the same communicator: every size up to its 1 MiB limit and past it
// (NCCL takes over), eagerly and replayed from one captured graph with fresh inputs (the kernel alternates
// buffer halves by call parity, so several replays matter).
TEST_P(NcclCollectives, OneShotAllReduceMatchesMpiAtEverySize) {
  const DType dtype = GetParam();
  const int p = world_size(), r = world_rank();
  kernels::LaunchPolicy policy;
  nccl_->use_one_shot_all_reduce(parallel::make_one_shot_all_reduce(MPI_COMM_WORLD, local_gpu(), policy));
  for (const size_t count :
       {size_t(1), size_t(7), size_t(2048), size_t(4099), size_t(65536 + 3), size_t(300000)}) {
    SCOPED_TRACE("count " + std::to_string(count) + " (" + std::to_string(count * dtype_size(dtype)) +
                 " bytes)");
    DeviceBuffer sum(count, dtype);
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    for (int round = 0; round < 5; ++round) {
      const auto v = random_values(count, 1000 * round + 10 * r + static_cast<unsigned>(count % 97));
      sum.upload(v, stream_);
      if (round < 2) {
        nccl_->all_reduce_sum(sum.data(), count, dtype);  // eager, twice: both buffer halves
      } else {
        if (exec == nullptr) {
          CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
          nccl_->all_reduce_sum(sum.data(), count, dtype);
          CUDA_CHECK(cudaStreamEndCapture(stream_, &graph));
          CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
        }
        CUDA_CHECK(cudaGraphLaunch(exec, stream_));
      }
      std::vector<float> want = v;
      mpi_->all_reduce_sum(want.data(), count, DType::kF32);
      expect_near(sum.download(stream_), want, dtype, p, "one-shot all_reduce_sum");
    }
    CUDA_CHECK(cudaGraphExecDestroy(exec));
    CUDA_CHECK(cudaGraphDestroy(graph));
  }
}

// The one-shot kernel's fused sum + residual add + RMSNorm against the two steps it replaces (the one-shot
// sum, then the rmsnorm kernel): the same sums and residuals bit for bit, the same normed rows bit for bit up
// to hidden 2048 (the same reduction order) and within a bf16 rounding above, and the normed rows against the
// host's formula; eagerly and replayed in a graph with fresh inputs. Rows past its limits are refused.
TEST_P(NcclCollectives, OneShotAllReduceAddRmsNormMatchesTheTwoSteps) {
  if (GetParam() != DType::kBF16) GTEST_SKIP() << "bf16 rows only (the decode activations)";
  const int r = world_rank();
  const float eps = 1e-6f;
  kernels::LaunchPolicy policy;
  nccl_->use_one_shot_all_reduce(parallel::make_one_shot_all_reduce(MPI_COMM_WORLD, local_gpu(), policy));
  for (const auto& [tokens, hidden] :
       std::vector<std::pair<int, int>>{{1, 2048}, {3, 96}, {16, 2048}, {65, 2048}, {200, 2048}, {2, 4096}}) {
    SCOPED_TRACE(std::to_string(tokens) + " rows of " + std::to_string(hidden));
    const size_t n = static_cast<size_t>(tokens) * hidden;
    DeviceBuffer x_a(n, DType::kBF16), res_a(n, DType::kBF16), out_a(n, DType::kBF16);
    DeviceBuffer x_b(n, DType::kBF16), res_b(n, DType::kBF16), out_b(n, DType::kBF16);
    DeviceBuffer w(static_cast<size_t>(hidden), DType::kBF16);
    const std::vector<float> wv = random_values(hidden, 7 + hidden);  // the same on every rank
    w.upload(wv, stream_);
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    for (int round = 0; round < 5; ++round) {
      const auto xv = random_values(n, 100 * round + 10 * r + tokens);
      const auto rv = random_values(n, 5000 + 100 * round + tokens);  // residual: the same on every rank
      x_a.upload(xv, stream_);
      x_b.upload(xv, stream_);
      res_a.upload(rv, stream_);
      res_b.upload(rv, stream_);
      auto fused = [&] {
        return nccl_->all_reduce_add_rmsnorm(x_a.data(), res_a.data(), w.data(), out_a.data(), tokens, hidden,
                                             eps);
      };
      if (round < 2) {
        ASSERT_TRUE(fused());  // eager, twice: both buffer halves
      } else {
        if (exec == nullptr) {
          CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
          const bool taken = fused();
          CUDA_CHECK(cudaStreamEndCapture(stream_, &graph));
          ASSERT_TRUE(taken);
          CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
        }
        CUDA_CHECK(cudaGraphLaunch(exec, stream_));
      }
      nccl_->all_reduce_sum(x_b.data(), n, DType::kBF16);
      kernels::RmsNormParams two_step;
      two_step.x = static_cast<const kernels::bf16*>(x_b.data());
      two_step.residual = static_cast<kernels::bf16*>(res_b.data());
      two_step.weight = static_cast<const kernels::bf16*>(w.data());
      two_step.out = static_cast<kernels::bf16*>(out_b.data());
      two_step.tokens = tokens;
      two_step.hidden = hidden;
      two_step.eps = eps;
      kernels::launch_rmsnorm(two_step, stream_, policy);
      CUDA_CHECK(cudaStreamSynchronize(stream_));

      expect_same(x_a.download(stream_), x_b.download(stream_), "sums");
      const std::vector<float> residual = res_a.download(stream_), out = out_a.download(stream_);
      expect_same(residual, res_b.download(stream_), "residuals");
      if (hidden <= 2048)
        expect_same(out, out_b.download(stream_), "normed rows");
      else
        expect_near(out, out_b.download(stream_), DType::kBF16, 1, "normed rows");
      std::vector<float> want(n);
      for (int t = 0; t < tokens; ++t) {
        double sum_sq = 0;
        for (int i = 0; i < hidden; ++i)
          sum_sq += double(residual[size_t(t) * hidden + i]) * residual[size_t(t) * hidden + i];
        const double inv = 1.0 / std::sqrt(sum_sq / hidden + eps);
        for (int i = 0; i < hidden; ++i)
          want[size_t(t) * hidden + i] = static_cast<float>(wv[i] * residual[size_t(t) * hidden + i] * inv);
      }
      expect_near(out, want, DType::kBF16, 2, "normed rows against the host");
    }
    CUDA_CHECK(cudaGraphExecDestroy(exec));
    CUDA_CHECK(cudaGraphDestroy(graph));
  }
  // Past the limits (1 MiB, 16 KB of rows a block, rows of 16-byte pieces): refused, nothing enqueued.
  DeviceBuffer any(8, DType::kBF16);
  for (const auto& [tokens, hidden] : std::vector<std::pair<int, int>>{{600, 2048}, {1, 8200}, {1, 100}})
    EXPECT_FALSE(
        nccl_->all_reduce_add_rmsnorm(any.data(), any.data(), any.data(), any.data(), tokens, hidden, eps))
        << tokens << " rows of " << hidden;
}

// The probe behind parallel.all_reduce: auto. The GPUs here are on one host with peer access (the test above
// relies on it too). Then the last rank claims the GPU of the rank before it (a GPU has no peer access to
// itself): every rank answers no, with the reason of the lowest rank that cannot, and nothing throws.
TEST(OneShotSupport, AgreesOnEveryRank) {
  TPS_REQUIRE_MULTIGPU();
  const int p = world_size(), r = world_rank();
  std::string why = "untouched";
  ASSERT_TRUE(parallel::one_shot_all_reduce_supported(MPI_COMM_WORLD, local_gpu(), &why)) << why;
  EXPECT_EQ(why, "untouched");

  const int claimed = r == p - 1 ? local_gpu() - 1 : local_gpu();
  EXPECT_FALSE(parallel::one_shot_all_reduce_supported(MPI_COMM_WORLD, claimed, &why));
  const std::string gpu = std::to_string(p - 2);
  const std::string want = "needs peer access from GPU " + gpu + " (rank " + gpu + ") to GPU " + gpu +
                           " (rank " + std::to_string(p - 1) + ")";
  EXPECT_EQ(why.rfind(want, 0), 0u) << why;
}

// The one-shot's CUDA setup failing on one rank (here: the last rank names a GPU that does not exist) ends
// alike on every rank: try_make returns nullptr with that rank's error everywhere (auto then takes NCCL),
// make throws everywhere, and nobody is left waiting in the setup's collectives. A good setup still works
// after.
TEST(OneShotSupport, SetupFailureEndsAlikeOnEveryRank) {
  TPS_REQUIRE_MULTIGPU();
  const int p = world_size(), r = world_rank();
  kernels::LaunchPolicy policy;
  const int device = r == p - 1 ? 1 << 20 : local_gpu();
  std::string why;
  EXPECT_EQ(parallel::try_make_one_shot_all_reduce(MPI_COMM_WORLD, device, policy, &why), nullptr);
  EXPECT_NE(why.find("rank setup failed"), std::string::npos) << why;
  EXPECT_THROW(parallel::make_one_shot_all_reduce(MPI_COMM_WORLD, device, policy), Error);
  CUDA_CHECK(cudaSetDevice(local_gpu()));
  EXPECT_NE(parallel::try_make_one_shot_all_reduce(MPI_COMM_WORLD, local_gpu(), policy, &why), nullptr)
      << why;
}

INSTANTIATE_TEST_SUITE_P(Dtypes, NcclCollectives, ::testing::Values(DType::kF32, DType::kBF16),
                         [](const ::testing::TestParamInfo<DType>& i) {
                           return std::string(dtype_name(i.param));
                         });

}  // namespace
}  // namespace tpserve
