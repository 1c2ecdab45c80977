// MoE combine: grid (column chunk, token), 8 columns per thread, slots summed in order (deterministic).
#include <algorithm>

#include "kernels/device_common.cuh"
#include "kernels/launch.h"
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
  float sum[kBf16PerVec] = {};
  for (int j = 0; j < p.k; ++j) {
    const int64_t slot = static_cast<int64_t>(token) * p.k + j;
    if (p.topk_ids != nullptr) {
      const int e = p.topk_ids[slot] - p.expert_begin;
      if (e < 0 || e >= p.num_experts) continue;
    }
    const int64_t row = p.origin != nullptr ? p.origin[slot] : slot;
    if (row < 0) continue;  // a slot moe_pack could not place
    const int64_t at = row * p.hidden + vec * kBf16PerVec;
    float y[kBf16PerVec];
    if (p.y_f32 != nullptr) {
      const float4 lo = *reinterpret_cast<const float4*>(p.y_f32 + at);
      const float4 hi = *reinterpret_cast<const float4*>(p.y_f32 + at + 4);
      y[0] = lo.x, y[1] = lo.y, y[2] = lo.z, y[3] = lo.w, y[4] = hi.x, y[5] = hi.y, y[6] = hi.z, y[7] = hi.w;
    } else {
      unpack_bf16x8(load_vec(p.y_bf16 + at), y);
    }
    const float w = p.weights[slot];
#pragma unroll
    for (int i = 0; i < kBf16PerVec; ++i) sum[i] += w * y[i];
  }
  store_vec(p.out + static_cast<int64_t>(token) * p.hidden + vec * kBf16PerVec, pack_bf16x8(sum));
}

}  // namespace

void launch_moe_combine(const MoeCombineParams& p, cudaStream_t stream, const LaunchPolicy& policy) {
  const int vectors = p.hidden / kBf16PerVec;
  const dim3 grid((vectors + kThreads - 1) / kThreads, p.tokens);
  launch(policy, Site::kMoeCombine, Pdl::kEnrolled, moe_combine_kernel, grid, dim3(kThreads), 0, stream, p);
}

}  // namespace tpserve::kernels
