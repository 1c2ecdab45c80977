// Top-k softmax gating: one warp per token. Lane l holds experts l, l + 32, ... in registers; k rounds of a
// warp arg-max over (probability desc, index asc) pick the experts in order, as the CPU's sort does.
#include <climits>

#include "kernels/device_common.cuh"
#include "kernels/launch.h"
#include "kernels/pdl.cuh"
#include "kernels/topk_gating.h"

namespace tpserve::kernels {
namespace {

constexpr int kWarpsPerBlock = 4;

// kPerLane experts per lane: sized to the model (128 experts: 4), so that the softmax and each of the k
// arg-max rounds touch only the registers that hold experts.
template <int kPerLane>
__global__ void topk_gating_kernel(const TopkGatingParams p) {
  pdl_wait_then_trigger();
  const int lane = threadIdx.x % kWarpSize;
  const int token = blockIdx.x * kWarpsPerBlock + threadIdx.x / kWarpSize;
  if (token >= p.tokens) return;
  const float* logits = p.logits + static_cast<int64_t>(token) * p.num_experts;
  float prob[kPerLane];
  float max_logit = -INFINITY;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const int e = lane + i * kWarpSize;
    prob[i] = e < p.num_experts ? logits[e] : -INFINITY;
    max_logit = fmaxf(max_logit, prob[i]);
  }
  max_logit = warp_max(max_logit);
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    prob[i] = lane + i * kWarpSize < p.num_experts ? expf(prob[i] - max_logit) : 0.0f;
    sum += prob[i];
  }
  sum = warp_sum(sum);
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) prob[i] /= sum;

  uint32_t taken = 0;  // bit i: expert lane + 32 i already picked
  float picked_prob[kGatingMaxK];
  int picked_id[kGatingMaxK];
  float picked_sum = 0.0f;
#pragma unroll
  for (int j = 0; j < kGatingMaxK; ++j) {
    if (j >= p.k) break;
    float best = -1.0f;
    int best_id = INT_MAX;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      const int e = lane + i * kWarpSize;
      if (e < p.num_experts && !(taken >> i & 1u) && prob[i] > best) best = prob[i], best_id = e;
    }
#pragma unroll
    for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
      const float other = __shfl_xor_sync(0xffffffffu, best, offset);
      const int other_id = __shfl_xor_sync(0xffffffffu, best_id, offset);
      if (other > best || (other == best && other_id < best_id)) best = other, best_id = other_id;
    }
    if (best_id % kWarpSize == lane) taken |= 1u << (best_id / kWarpSize);
    picked_prob[j] = best;
    picked_id[j] = best_id;
    picked_sum += best;  // in pick order, as the CPU reference sums
  }
  if (lane == 0) {
    float* weights = p.weights + static_cast<int64_t>(token) * p.k;
    int32_t* ids = p.ids + static_cast<int64_t>(token) * p.k;
#pragma unroll
    for (int j = 0; j < kGatingMaxK; ++j) {
      if (j >= p.k) break;
      weights[j] = p.renormalize ? picked_prob[j] / picked_sum : picked_prob[j];
      ids[j] = picked_id[j];
    }
  }
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
