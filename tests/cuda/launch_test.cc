// The launcher: decisions are cached per (device, site, kernel) with one attribute query per (device,
// kernel); a kernel launched as Pdl::kNever never carries the PDL attribute (checked on a captured graph,
// where the attribute becomes a programmatic edge).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/cuda_check.h"
#include "kernels/launch.h"
#include "kernels/paged_attention.h"
#include "runtime/backend/cuda/cuda_backend.h"
#include "tests/cuda/launch_test_kernels.h"
#include "tests/cuda/op_test_util.h"

namespace tpserve {
namespace {

using kernels::LaunchPolicy;
using kernels::PdlMode;
using kernels::PdlSettings;
using kernels::Site;

class DeviceInt {
 public:
  DeviceInt() { CUDA_CHECK(cudaMalloc(&ptr_, sizeof(int))); }
  ~DeviceInt() { cudaFree(ptr_); }
  int* get() const { return ptr_; }
  int read() const {
    int v = 0;
    CUDA_CHECK(cudaMemcpy(&v, ptr_, sizeof(int), cudaMemcpyDeviceToHost));
    return v;
  }

 private:
  int* ptr_ = nullptr;
};

class Stream {
 public:
  Stream() { CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }
  ~Stream() { cudaStreamDestroy(stream_); }
  cudaStream_t get() const { return stream_; }
  void sync() const { CUDA_CHECK(cudaStreamSynchronize(stream_)); }

 private:
  cudaStream_t stream_ = nullptr;
};

TEST(Launch, DecisionsAreCachedPerDevice) {
  TPS_REQUIRE_CUDA_DEVICE();
  const int devices = cuda_device_count();
  PdlSettings settings;
  settings.default_mode = PdlMode::kOn;
  LaunchPolicy policy(settings);
  for (int d = 0; d < devices; ++d) {
    CUDA_CHECK(cudaSetDevice(d));
    DeviceInt out;
    Stream stream;
    for (int i = 0; i < 3; ++i)
      launch_test::launch_enrolled(policy, Site::kRmsNorm, stream.get(), out.get(), 40 + i);
    launch_test::launch_enrolled(policy, Site::kAdd, stream.get(), out.get(), 7);
    stream.sync();
    EXPECT_EQ(out.read(), 7);
    policy.decide(Site::kRmsNorm, launch_test::enrolled_kernel(), kernels::Pdl::kEnrolled);
  }
  CUDA_CHECK(cudaSetDevice(0));
  // One cudaFuncGetAttributes per (device, kernel), whatever the number of sites and launches.
  EXPECT_EQ(policy.kernel_attribute_queries(), devices);
  const auto rows = policy.report();
  ASSERT_EQ(rows.size(), static_cast<size_t>(2 * devices)) << kernels::format_pdl_report(rows);
  for (const auto& row : rows) {
    EXPECT_TRUE(row.decision.enabled) << row.decision.reason;  // `on` is honoured on every architecture
    EXPECT_EQ(row.launches, row.site == Site::kRmsNorm ? 3u : 1u);
    EXPECT_GT(row.kernel_sm, 0);
    EXPECT_NE(row.kernel.find("enrolled_write"), std::string::npos) << row.kernel;
  }
}

TEST(Launch, AutoFollowsDeviceArchitecture) {
  TPS_REQUIRE_CUDA_DEVICE();
  LaunchPolicy policy{PdlSettings{}};
  DeviceInt out;
  Stream stream;
  launch_test::launch_enrolled(policy, Site::kGemv, stream.get(), out.get(), 1);
  stream.sync();
  const auto rows = policy.report();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].decision.enabled, rows[0].device_sm >= 90 && rows[0].kernel_sm >= 90)
      << rows[0].decision.reason;
}

TEST(Launch, UnenrolledKernelNeverGetsTheAttribute) {
  TPS_REQUIRE_CUDA_DEVICE();
  PdlSettings settings;
  settings.default_mode = PdlMode::kOn;  // every enrolled launch carries the attribute
  LaunchPolicy policy(settings);
  DeviceInt out;
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  launch_test::launch_enrolled(policy, Site::kRmsNorm, stream, out.get(), 1);
  launch_test::launch_unenrolled(policy, Site::kRmsNorm, stream, out.get(), 2);
  launch_test::launch_enrolled(policy, Site::kRmsNorm, stream, out.get(), 3);
  cudaGraph_t graph;
  CUDA_CHECK(cudaStreamEndCapture(stream, &graph));

  constexpr size_t kMaxEdges = 16;
  std::vector<cudaGraphNode_t> from(kMaxEdges), to(kMaxEdges);
  std::vector<cudaGraphEdgeData> data(kMaxEdges);
  size_t edges = kMaxEdges;
  CUDA_CHECK(cudaGraphGetEdges(graph, from.data(), to.data(), data.data(), &edges));
  ASSERT_EQ(edges, 2u);
  for (size_t i = 0; i < edges; ++i) {
    cudaKernelNodeParams params{};
    CUDA_CHECK(cudaGraphKernelNodeGetParams(to[i], &params));
    const bool into_unenrolled = params.func == launch_test::unenrolled_kernel();
    EXPECT_EQ(data[i].type == cudaGraphDependencyTypeProgrammatic, !into_unenrolled)
        << "edge " << i << " into the " << (into_unenrolled ? "unenrolled" : "enrolled") << " kernel";
  }
  cudaGraphExec_t exec;
  CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  CUDA_CHECK(cudaGraphLaunch(exec, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  EXPECT_EQ(out.read(), 3);
  CUDA_CHECK(cudaGraphExecDestroy(exec));
  CUDA_CHECK(cudaGraphDestroy(graph));
  CUDA_CHECK(cudaStreamDestroy(stream));

  for (const auto& row : policy.report()) {
    if (row.enrolled) continue;
    EXPECT_FALSE(row.decision.enabled);
    EXPECT_NE(row.decision.reason.find("not enrolled"), std::string::npos) << row.decision.reason;
  }
}

TEST(Launch, KillSwitchWins) {
  TPS_REQUIRE_CUDA_DEVICE();
  PdlSettings settings;
  settings.default_mode = PdlMode::kOn;
  settings.kill_switch = true;
  LaunchPolicy policy(settings);
  EXPECT_FALSE(
      policy.decide(Site::kRmsNorm, launch_test::enrolled_kernel(), kernels::Pdl::kEnrolled).enabled);
}

// The occupancy arithmetic behind resident_blocks_per_sm (host only: runs without a GPU), on H200 limits.
TEST(ResidentBlocks, RegistersSharedMemoryAndThreadsEachBound) {
  const kernels::SmLimits h200;
  // The tensor-core decode attention at head_dim 128: 166 registers (5376 a warp), 5584 + 69632 bytes.
  EXPECT_EQ(kernels::resident_blocks(h200, 166, 5584, 128, 69632), 3);
  EXPECT_EQ(kernels::resident_blocks(h200, 128, 0, 128, 0), 4);          // registers: 16 warps
  EXPECT_EQ(kernels::resident_blocks(h200, 32, 0, 256, 0), 8);           // threads: 2048 / 256
  EXPECT_EQ(kernels::resident_blocks(h200, 32, 0, 32, 0), 32);           // the block limit
  EXPECT_EQ(kernels::resident_blocks(h200, 64, 100000, 128, 15000), 2);  // shared memory
  EXPECT_EQ(kernels::resident_blocks(h200, 64, 0, 128, 240000), 0);      // does not fit at all
  // 24836 + 1024 bytes a block: 9.03 blocks of 233472 bytes, but 8.98 in 128-byte units.
  EXPECT_EQ(kernels::resident_blocks(h200, 32, 24836, 128, 0), 8);
  // 200 registers: 6400 a warp, 2 warps in each sub-partition's 16384 (8 an SM, not 65536 / 6400 = 10).
  EXPECT_EQ(kernels::resident_blocks(h200, 200, 0, 64, 0), 4);
}

TEST(ResidentBlocks, DecodeAttentionKernelsFitOnTheDevice) {
  TPS_REQUIRE_CUDA_DEVICE();
  for (bool tensor_cores : {false, true})
    for (int head_dim : {32, 64, 128}) {
      const int blocks = kernels::attention_decode_blocks_per_sm(tensor_cores, head_dim);
      EXPECT_GE(blocks, 1) << "tensor cores " << tensor_cores << ", head_dim " << head_dim;
      EXPECT_LE(blocks, 16) << "tensor cores " << tensor_cores << ", head_dim " << head_dim;
    }
}

}  // namespace
}  // namespace tpserve
