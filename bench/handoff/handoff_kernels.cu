// handoff's kernels: 256 threads a block; block b owns rows [b R, b R + R) of every W_s (R = rows_per_block),
// copied to shared memory by cp.async from warps 1..7 (warp 0 issues no copy, so the thread that signals a
// stage's arrival has none outstanding at its release); x_s staged in shared memory through L2; warp w sums
// rows w, w + 8, ... (lanes over 8-element vectors, then a butterfly), lane 0 stores the bf16 result.
#include "bench/handoff/handoff_kernels.h"

#include <algorithm>

#include "common/cuda_check.h"
#include "common/error.h"
#include "kernels/device_common.cuh"
#include "kernels/grid_stage.cuh"
#include "kernels/pdl.cuh"

namespace tpserve::bench {
namespace {

using kernels::bf16;
constexpr int kThreads = 256;
constexpr int kWarps = kThreads / kernels::kWarpSize;
constexpr int kCopyThreads = kThreads - kernels::kWarpSize;  // warps 1..7

// This block's rows of W_s into w (one contiguous range: the rows are consecutive), one commit group.
__device__ void copy_weights(const HandoffChain& c, int s, bf16* w) {
  const int64_t first =
      (static_cast<int64_t>(s) * c.hidden + static_cast<int64_t>(blockIdx.x) * c.rows_per_block) * c.hidden;
  const int pieces = c.rows_per_block * c.hidden / kernels::kBf16PerVec;
  for (int i = static_cast<int>(threadIdx.x) - kernels::kWarpSize; i < pieces; i += kCopyThreads)
    if (i >= 0)
      kernels::cp_async_16(w + i * kernels::kBf16PerVec, c.weights + first + i * kernels::kBf16PerVec, true);
  kernels::cp_async_commit();
}

// x_s into xs [hidden], read through L2 (a predecessor stage wrote it).
__device__ void load_x(const HandoffChain& c, int s, bf16* xs) {
  const uint4* x = reinterpret_cast<const uint4*>(c.activations + static_cast<int64_t>(s) * c.hidden);
  for (int v = threadIdx.x; v < c.hidden / kernels::kBf16PerVec; v += kThreads)
    kernels::store_vec(xs + v * kernels::kBf16PerVec, __ldcg(x + v));
}

// x_{s+1}'s rows of this block from w [rows_per_block, hidden] and xs [hidden], both in shared memory.
__device__ void compute_rows(const HandoffChain& c, int s, const bf16* w, const bf16* xs) {
  const int lane = threadIdx.x % kernels::kWarpSize, warp = threadIdx.x / kernels::kWarpSize;
  const int vectors = c.hidden / kernels::kBf16PerVec;
  bf16* y = c.activations + static_cast<int64_t>(s + 1) * c.hidden +
            static_cast<int64_t>(blockIdx.x) * c.rows_per_block;
  if (c.skew && (blockIdx.x * 7 + s) % 5 == 0) __nanosleep(2000);  // GPU tests: a late block
  for (int row = warp; row < c.rows_per_block; row += kWarps) {
    float sum = 0.0f;
    for (int v = lane; v < vectors; v += kernels::kWarpSize) {
      float a[kernels::kBf16PerVec], b[kernels::kBf16PerVec];
      kernels::unpack_bf16x8(
          kernels::load_vec(w + (static_cast<int64_t>(row) * vectors + v) * kernels::kBf16PerVec), a);
      kernels::unpack_bf16x8(kernels::load_vec(xs + v * kernels::kBf16PerVec), b);
#pragma unroll
      for (int i = 0; i < kernels::kBf16PerVec; ++i) sum += a[i] * b[i];
    }
    sum = kernels::warp_sum(sum);
    if (lane == 0) y[row] = __float2bfloat16(sum * c.scale);
  }
}

// One stage a grid. Enrolled in PDL whole: weights copied before the wait (nothing in the chain writes
// them), x_s read after it.
__global__ void __launch_bounds__(kThreads) handoff_stage_kernel(const HandoffChain c, int s) {
  extern __shared__ __align__(16) unsigned char smem[];
  bf16* w = reinterpret_cast<bf16*>(smem);
  bf16* xs = w + c.rows_per_block * c.hidden;
  copy_weights(c, s, w);
  kernels::pdl_wait_then_trigger();
  load_x(c, s, xs);
  kernels::cp_async_wait_all();
  __syncthreads();
  compute_rows(c, s, w, xs);
}

// Every stage in one grid, stages separated by kernels/grid_stage.cuh's counter. With two buffers, W_{s+1}
// is copied while the block waits for stage s's input and computes stage s; with one, W_s is copied after
// the block's stage s - 1 arrival.
template <bool kTwoBuffers, bool kRelaxedPoll>
__global__ void __launch_bounds__(kThreads) handoff_persistent_kernel(const HandoffChain c) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int row_elems = c.rows_per_block * c.hidden;
  bf16* buffers[2] = {reinterpret_cast<bf16*>(smem),
                      reinterpret_cast<bf16*>(smem) + (kTwoBuffers ? row_elems : 0)};
  bf16* xs = buffers[1] + row_elems;
  if (kTwoBuffers) copy_weights(c, 0, buffers[0]);
  for (int s = 0; s < c.stages; ++s) {
    bf16* w = buffers[s & 1];
    const bool next_in_flight = kTwoBuffers && s + 1 < c.stages;
    if (!kTwoBuffers) copy_weights(c, s, w);
    if (next_in_flight) copy_weights(c, s + 1, buffers[(s + 1) & 1]);  // its buffer's stage s - 1 is done
    if (s > 0 && !c.skip_waits)
      kernels::grid_stage_wait(c.counter, static_cast<unsigned int>(s) * gridDim.x, kRelaxedPoll);
    load_x(c, s, xs);
    if (next_in_flight)
      kernels::cp_async_wait_one();
    else
      kernels::cp_async_wait_all();
    __syncthreads();
    compute_rows(c, s, w, xs);
    kernels::grid_stage_arrive(c.counter);  // its barrier also frees w and xs for the next stage
  }
}

bool persistent(HandoffArm arm) {
  return arm == HandoffArm::kPersistent || arm == HandoffArm::kPersistent2Buf ||
         arm == HandoffArm::kPersistentRelaxed;
}

const void* kernel_of(HandoffArm arm) {
  switch (arm) {
    case HandoffArm::kPersistent:
      return reinterpret_cast<const void*>(handoff_persistent_kernel<false, false>);
    case HandoffArm::kPersistent2Buf:
      return reinterpret_cast<const void*>(handoff_persistent_kernel<true, false>);
    case HandoffArm::kPersistentRelaxed:
      return reinterpret_cast<const void*>(handoff_persistent_kernel<false, true>);
    default:
      return reinterpret_cast<const void*>(handoff_stage_kernel);
  }
}

}  // namespace

const char* handoff_arm_name(HandoffArm arm) {
  switch (arm) {
    case HandoffArm::kKernelsPdl:
      return "kernels_pdl";
    case HandoffArm::kKernels:
      return "kernels";
    case HandoffArm::kKernelsPdlAlone:
      return "kernels_pdl_alone";
    case HandoffArm::kPersistent:
      return "persistent";
    case HandoffArm::kPersistent2Buf:
      return "persistent_2buf";
    case HandoffArm::kPersistentRelaxed:
      return "persistent_relaxed";
  }
  return "?";
}

int handoff_rows_per_block(int hidden, int sms) {
  TPS_CHECK(hidden > 0 && sms > 0, "handoff: hidden ", hidden, " and ", sms, " SMs");
  int rows = (hidden + sms - 1) / sms;
  while (hidden % rows != 0) ++rows;
  return rows;
}

size_t handoff_smem_bytes(const HandoffChain& c, HandoffArm arm) {
  const size_t rows = size_t(c.rows_per_block) * c.hidden * sizeof(bf16);
  const size_t bytes = (arm == HandoffArm::kPersistent2Buf ? 2 : 1) * rows + size_t(c.hidden) * sizeof(bf16);
  if (arm != HandoffArm::kKernelsPdlAlone) return bytes;
  return std::max(bytes, size_t(c.sm_shared_bytes) / 2 + 1024);  // two would need more than the SM has
}

void check_handoff_fits(const HandoffChain& c, HandoffArm arm, int device) {
  TPS_CHECK(c.stages > 0 && c.hidden > 0 && c.hidden % kernels::kBf16PerVec == 0 && c.rows_per_block > 0 &&
                c.hidden % c.rows_per_block == 0,
            "handoff: ", c.stages, " stages of hidden ", c.hidden, " (a multiple of 8) in blocks of ",
            c.rows_per_block, " rows (a divisor of hidden)");
  int optin = 0, sms = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const size_t smem = handoff_smem_bytes(c, arm);
  TPS_CHECK(smem <= size_t(optin), "handoff: ", handoff_arm_name(arm), " needs ", smem,
            " bytes of shared memory a block; the device allows ", optin, " (fewer rows a block: more SMs)");
  // The stage kernel serves three arms: its limit is the largest of theirs, whatever order they come in.
  size_t limit = smem;
  if (!persistent(arm))
    for (HandoffArm other : {HandoffArm::kKernelsPdl, HandoffArm::kKernels, HandoffArm::kKernelsPdlAlone})
      limit = std::max(limit, std::min(handoff_smem_bytes(c, other), size_t(optin)));
  const void* kernel = kernel_of(arm);
  CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(limit)));
  if (!persistent(arm)) return;
  int per_sm = 0;
  CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, smem));
  TPS_CHECK(per_sm * sms >= c.blocks(), "handoff: the persistent grid of ", c.blocks(),
            " blocks does not fit at once (", per_sm, " a SM x ", sms, " SMs)");
}

void enqueue_handoff_chain(const HandoffChain& c, HandoffArm arm, cudaStream_t stream) {
  CUDA_CHECK(cudaMemsetAsync(c.counter, 0, sizeof(unsigned int), stream));
  cudaLaunchAttribute attribute{};
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(c.blocks());
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = handoff_smem_bytes(c, arm);
  config.stream = stream;
  config.attrs = &attribute;
  if (persistent(arm)) {
    attribute.id = cudaLaunchAttributeCooperative;
    attribute.val.cooperative = 1;
    config.numAttrs = 1;
    if (arm == HandoffArm::kPersistent2Buf)
      CUDA_CHECK(cudaLaunchKernelEx(&config, handoff_persistent_kernel<true, false>, c));
    else if (arm == HandoffArm::kPersistentRelaxed)
      CUDA_CHECK(cudaLaunchKernelEx(&config, handoff_persistent_kernel<false, true>, c));
    else
      CUDA_CHECK(cudaLaunchKernelEx(&config, handoff_persistent_kernel<false, false>, c));
    return;
  }
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  const bool pdl = arm == HandoffArm::kKernelsPdl || arm == HandoffArm::kKernelsPdlAlone;
  for (int s = 0; s < c.stages; ++s) {
    // The first stage follows the memset: no programmatic edge there in any arm.
    config.numAttrs = pdl && s > 0 ? 1 : 0;
    CUDA_CHECK(cudaLaunchKernelEx(&config, handoff_stage_kernel, c, s));
  }
}

}  // namespace tpserve::bench
