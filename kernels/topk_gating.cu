// Top-k softmax gating: one warp per token (kernels/topk_gating.cuh).
#include "kernels/launch.h"
#include "kernels/pdl.cuh"
#include "kernels/topk_gating.cuh"

namespace tpserve::kernels {
namespace {

constexpr int kWarpsPerBlock = 4;

__global__ void topk_gating_kernel(const TopkGatingParams p) {
  pdl_wait_then_trigger();
  const int lane = threadIdx.x % kWarpSize;
  const int token = blockIdx.x * kWarpsPerBlock + threadIdx.x / kWarpSize;
  if (token >= p.tokens) return;
  float weight[kGatingMaxK];
  int id[kGatingMaxK];
  warp_topk_gating(p.logits + static_cast<int64_t>(token) * p.num_experts, p.num_experts, p.k, p.renormalize,
                   weight, id);
  if (lane == 0) {
    float* weights = p.weights + static_cast<int64_t>(token) * p.k;
    int32_t* ids = p.ids + static_cast<int64_t>(token) * p.k;
#pragma unroll
    for (int j = 0; j < kGatingMaxK; ++j) {
      if (j >= p.k) break;
      weights[j] = weight[j];
      ids[j] = id[j];
    }
  }
}

}  // namespace

void launch_topk_gating(const TopkGatingParams& p, cudaStream_t stream, const LaunchPolicy& policy) {
  const dim3 grid((p.tokens + kWarpsPerBlock - 1) / kWarpsPerBlock);
  launch(policy, Site::kTopkGating, Pdl::kEnrolled, topk_gating_kernel, grid,
         dim3(kWarpsPerBlock * kWarpSize), 0, stream, p);
}

}  // namespace tpserve::kernels
