// RMSNorm (and fused add + RMSNorm, with x optionally the MoE combine's sum): one row per block, the row held
// in registers as 16-byte vectors, fp32 math, one block reduction for the sum of squares.
#include "kernels/device_common.cuh"
#include "kernels/launch.h"
#include "kernels/moe_combine.cuh"
#include "kernels/pdl.cuh"
#include "kernels/rmsnorm.cuh"
#include "kernels/rmsnorm.h"

namespace tpserve::kernels {
namespace {

constexpr int kMaxVecPerThread = 4;
constexpr int kMaxThreads = 1024;
static_assert(kMaxThreads * kMaxVecPerThread * kBf16PerVec >= kRmsNormMaxHidden);

__global__ void rmsnorm_kernel(const RmsNormParams p) {
  __shared__ float scratch[kMaxThreads / kWarpSize];
  pdl_wait_then_trigger();
  const int64_t base = static_cast<int64_t>(blockIdx.x) * p.hidden;
  const int vectors = p.hidden / kBf16PerVec;
  float v[kMaxVecPerThread][kBf16PerVec];
  float sum_sq = 0.0f;
#pragma unroll
  for (int i = 0; i < kMaxVecPerThread; ++i) {
    const int vec = threadIdx.x + i * blockDim.x;
    if (vec >= vectors) break;
    const int64_t at = base + vec * kBf16PerVec;
    if (p.combine.k > 0) {  // the combine's bf16 output, as moe_combine would store it
      combine_piece(p.combine, blockIdx.x, vec * kBf16PerVec, v[i]);
      unpack_bf16x8(pack_bf16x8(v[i]), v[i]);
    } else {
      unpack_bf16x8(load_vec(p.x + at), v[i]);
    }
    if (p.residual != nullptr) add_residual_piece(p.residual + at, v[i]);
#pragma unroll
    for (int j = 0; j < kBf16PerVec; ++j) sum_sq += v[i][j] * v[i][j];
  }
  sum_sq = block_sum(sum_sq, scratch);
  const float inv = 1.0f / sqrtf(sum_sq / static_cast<float>(p.hidden) + p.eps);
#pragma unroll
  for (int i = 0; i < kMaxVecPerThread; ++i) {
    const int vec = threadIdx.x + i * blockDim.x;
    if (vec >= vectors) break;
    store_normed_piece(p.weight + vec * kBf16PerVec, v[i], inv, p.out + base + vec * kBf16PerVec);
  }
}

}  // namespace

void launch_rmsnorm(const RmsNormParams& p, cudaStream_t stream, const LaunchPolicy& policy) {
  const int vectors = p.hidden / kBf16PerVec;
  // As few vectors per thread as 1024 threads allow (<= kMaxVecPerThread for hidden <= kRmsNormMaxHidden).
  const int per_thread = (vectors + kMaxThreads - 1) / kMaxThreads;
  int threads = (vectors + per_thread - 1) / per_thread;
  threads = ((threads + kWarpSize - 1) / kWarpSize) * kWarpSize;
  const Site site = p.residual != nullptr ? Site::kAddRmsNorm : Site::kRmsNorm;
  launch(policy, site, Pdl::kEnrolled, rmsnorm_kernel, dim3(p.tokens), dim3(threads), 0, stream, p);
}

}  // namespace tpserve::kernels
