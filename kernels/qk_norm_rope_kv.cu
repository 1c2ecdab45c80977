// q/k RMSNorm + RoPE + paged KV append: one warp per head of one token. Lane l holds elements
// [l * E, l * E + E) of the head's first half and the same of its second half (E = ceil(D / 64)), so each
// RoPE pair (i, i + D/2) sits in one lane; fp32 math, one warp reduction for the norm.
#include <cmath>

#include "kernels/device_common.cuh"
#include "kernels/launch.h"
#include "kernels/pdl.cuh"
#include "kernels/qk_norm_rope_kv.h"

namespace tpserve::kernels {
namespace {

constexpr int kWarpsPerBlock = 4;
constexpr int kMaxPerLane = kRopeMaxHeadDim / 2 / kWarpSize;

__global__ void qk_norm_rope_kv_kernel(const QkNormRopeKvParams p) {
  pdl_wait_then_trigger();
  const int lane = threadIdx.x % kWarpSize;
  const int head = blockIdx.y * kWarpsPerBlock + threadIdx.x / kWarpSize;
  const int token = blockIdx.x;
  const int hq = p.num_q_heads, hkv = p.num_kv_heads, d = p.head_dim, half = d / 2;
  const int per_lane = (half + kWarpSize - 1) / kWarpSize;  // lanes past the half hold nothing
  if (head >= hq + 2 * hkv) return;
  const bool is_q = head < hq, is_v = head >= hq + hkv;
  const int64_t slot = p.slot_mapping[token];
  if (!is_q && slot < 0) return;  // padding row: nothing to append
  const bf16* src = p.qkv + static_cast<int64_t>(token) * (hq + 2 * hkv) * d + static_cast<int64_t>(head) * d;
  bf16* dst;
  if (is_q)
    dst = p.q_out + (static_cast<int64_t>(token) * hq + head) * d;
  else if (!is_v)
    dst = p.k_cache + (slot * hkv + (head - hq)) * d;
  else
    dst = p.v_cache + (slot * hkv + (head - hq - hkv)) * d;

  float x1[kMaxPerLane], x2[kMaxPerLane];
  float sum_sq = 0.0f;
#pragma unroll
  for (int e = 0; e < kMaxPerLane; ++e) {
    const int i = lane * per_lane + e;
    if (e >= per_lane || i >= half) break;
    x1[e] = __bfloat162float(src[i]);
    x2[e] = __bfloat162float(src[i + half]);
    sum_sq += x1[e] * x1[e] + x2[e] * x2[e];
  }
  if (is_v) {
#pragma unroll
    for (int e = 0; e < kMaxPerLane; ++e) {
      const int i = lane * per_lane + e;
      if (e >= per_lane || i >= half) break;
      dst[i] = src[i];
      dst[i + half] = src[i + half];
    }
    return;
  }
  sum_sq = warp_sum(sum_sq);
  const float inv = 1.0f / sqrtf(sum_sq / static_cast<float>(d) + p.eps);
  const bf16* w = is_q ? p.q_norm_weight : p.k_norm_weight;
  const float position = static_cast<float>(p.positions[token]);
#pragma unroll
  for (int e = 0; e < kMaxPerLane; ++e) {
    const int i = lane * per_lane + e;
    if (e >= per_lane || i >= half) break;
    const float y1 = __bfloat162float(w[i]) * (x1[e] * inv);
    const float y2 = __bfloat162float(w[i + half]) * (x2[e] * inv);
    float s, c;
    sincosf(position * p.inv_freq[i], &s, &c);
    dst[i] = __float2bfloat16(y1 * c - y2 * s);
    dst[i + half] = __float2bfloat16(y2 * c + y1 * s);
  }
}

}  // namespace

void set_rope_inv_freq(QkNormRopeKvParams& p, double theta) {
  const int d = p.head_dim;
  for (int i = 0; i < d / 2 && i < kRopeMaxHeadDim / 2; ++i)
    p.inv_freq[i] =
        1.0f / std::pow(static_cast<float>(theta), static_cast<float>(2 * i) / static_cast<float>(d));
}

void launch_qk_norm_rope_kv(const QkNormRopeKvParams& p, cudaStream_t stream, const LaunchPolicy& policy) {
  const int heads = p.num_q_heads + 2 * p.num_kv_heads;
  const dim3 grid(p.tokens, (heads + kWarpsPerBlock - 1) / kWarpsPerBlock);
  launch(policy, Site::kQkNormRopeKv, Pdl::kEnrolled, qk_norm_rope_kv_kernel, grid,
         dim3(kWarpsPerBlock * kWarpSize), 0, stream, p);
}

}  // namespace tpserve::kernels
