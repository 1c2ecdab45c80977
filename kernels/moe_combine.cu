// MoE combine: grid (column chunk, token), 8 columns per thread, slots summed in order (deterministic).
#include <algorithm>

#include "kernels/device_common.cuh"
#include "kernels/launch.h"
#include "kernels/moe_combine.cuh"
#include "kernels/moe_combine.h"
#include "kernels/pdl.cuh"

namespace tpserve::kernels {
namespace {

constexpr int kThreads = 128;

__global__ void moe_combine_kernel(const MoeCombineParams p) {
  pdl_wait_then_trigger();
  const int token = blockIdx.y;
  const int vec = blockIdx.x * blockDim.x + threadIdx.x;
  if (vec * kBf16PerVec >= p.hidden) return;
  float sum[kBf16PerVec];
  combine_piece(p, token, vec * kBf16PerVec, sum);
  store_vec(p.out + static_cast<int64_t>(token) * p.hidden + vec * kBf16PerVec, pack_bf16x8(sum));
}

}  // namespace

void launch_moe_combine(const MoeCombineParams& p, cudaStream_t stream, const LaunchPolicy& policy) {
  const int vectors = p.hidden / kBf16PerVec;
  const dim3 grid((vectors + kThreads - 1) / kThreads, p.tokens);
  launch(policy, Site::kMoeCombine, Pdl::kEnrolled, moe_combine_kernel, grid, dim3(kThreads), 0, stream, p);
}

}  // namespace tpserve::kernels
