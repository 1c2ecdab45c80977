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
  const int lane = threadIdx.x % kWarpSize;
  const int head = blockIdx.y * kWarpsPerBlock + threadIdx.x / kWarpSize;
  const int token = blockIdx.x;
  const int hq = p.num_q_heads, hkv = p.num_kv_heads, d = p.head_dim, half = d / 2;
  const int per_lane = (half + kWarpSize - 1) / kWarpSize;  // lanes past the half hold nothing
  const bool valid = head < hq + 2 * hkv, is_q = head < hq, is_v = head >= hq + hkv;
  // What no predecessor writes: the step inputs (QkNormRopeKvParams) and the norm weights, with the
  // rotation's sin / cos; read before the PDL wait when p.loads_before_wait, else right after it.
  int64_t slot = -1;
  float position = 0.0f, w1[kMaxPerLane], w2[kMaxPerLane], sn[kMaxPerLane], cs[kMaxPerLane];
  auto load_inputs = [&] {
    if (!valid) return;
    slot = p.slot_mapping[token];
    if (is_v) return;
    position = static_cast<float>(p.positions[token]);
    const bf16* w = is_q ? p.q_norm_weight : p.k_norm_weight;
#pragma unroll
    for (int e = 0; e < kMaxPerLane; ++e) {
      const int i = lane * per_lane + e;
      if (e >= per_lane || i >= half) break;
      w1[e] = __bfloat162float(w[i]);
      w2[e] = __bfloat162float(w[i + half]);
      sincosf(position * p.inv_freq[i], &sn[e], &cs[e]);
    }
  };
  if (p.loads_before_wait) load_inputs();
  pdl_wait_then_trigger();  // every thread waits, those that return at once included
  if (!p.loads_before_wait) load_inputs();
  if (!valid) return;
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
#pragma unroll
  for (int e = 0; e < kMaxPerLane; ++e) {
    const int i = lane * per_lane + e;
    if (e >= per_lane || i >= half) break;
    const float y1 = w1[e] * (x1[e] * inv);
    const float y2 = w2[e] * (x2[e] * inv);
    dst[i] = __float2bfloat16(y1 * cs[e] - y2 * sn[e]);
    dst[i + half] = __float2bfloat16(y2 * cs[e] + y1 * sn[e]);
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
