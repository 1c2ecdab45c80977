// Top-k softmax gating: one warp per token (kernels/topk_gating.cuh).
#include "kernels/device_common.cuh"
#include "kernels/launch.h"
#include "kernels/pdl.cuh"
#include "kernels/topk_gating.cuh"

namespace tpserve::kernels {
namespace {

constexpr int kWarpsPerBlock = 4;

template <int kPerLane>
__global__ void topk_gating_kernel(const TopkGatingParams p) {
  pdl_wait_then_trigger();
  const int token = blockIdx.x * kWarpsPerBlock + threadIdx.x / kWarpSize;
  if (token >= p.tokens) return;
  warp_topk_gating<kPerLane>(p.logits + static_cast<int64_t>(token) * p.num_experts, p.num_experts, p.k,
                             p.renormalize, p.weights + static_cast<int64_t>(token) * p.k,
                             p.ids + static_cast<int64_t>(token) * p.k, p.redux, p.by_logits);
}

}  // namespace

void launch_topk_gating(const TopkGatingParams& p, cudaStream_t stream, const LaunchPolicy& policy) {
  const dim3 grid((p.tokens + kWarpsPerBlock - 1) / kWarpsPerBlock), block(kWarpsPerBlock * kWarpSize);
  static_assert(kGatingMaxExperts == 16 * kWarpSize);
  auto kernel = p.num_experts <= 4 * kWarpSize   ? topk_gating_kernel<4>
                : p.num_experts <= 8 * kWarpSize ? topk_gating_kernel<8>
                                                 : topk_gating_kernel<16>;
  launch(policy, Site::kTopkGating, Pdl::kEnrolled, kernel, grid, block, 0, stream, p);
}

}  // namespace tpserve::kernels
