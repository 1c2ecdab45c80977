// q/k RMSNorm + RoPE + paged KV append: one warp per head of one token (kernels/qk_norm_rope.cuh).
#include <cmath>

#include "kernels/device_common.cuh"
#include "kernels/launch.h"
#include "kernels/pdl.cuh"
#include "kernels/qk_norm_rope.cuh"
#include "kernels/qk_norm_rope_kv.h"

namespace tpserve::kernels {
namespace {

constexpr int kWarpsPerBlock = 4;

__global__ void qk_norm_rope_kv_kernel(const QkNormRopeKvParams p) {
  const int head = blockIdx.y * kWarpsPerBlock + threadIdx.x / kWarpSize;
  const int token = blockIdx.x;
  const int hq = p.num_q_heads, hkv = p.num_kv_heads, d = p.head_dim;
  const bool valid = head < hq + 2 * hkv, is_q = head < hq, is_v = head >= hq + hkv;
  // What no predecessor writes: the step inputs (QkNormRopeKvParams) and the norm weights, with the
  // rotation's sin / cos; read before the PDL wait when p.loads_before_wait, else right after it.
  int64_t slot = -1;
  HeadRope rope;
  auto load_inputs = [&] {
    if (!valid) return;
    slot = p.slot_mapping[token];
    if (is_v) return;
    load_head_rope(
        rope, is_q ? p.q_norm_weight : p.k_norm_weight, static_cast<float>(p.positions[token]),
        [&](int i) { return p.inv_freq[i]; }, d);
  };
  if (p.loads_before_wait) load_inputs();
  pdl_wait_then_trigger();  // every thread waits, those that return at once included
  if (!p.loads_before_wait) load_inputs();
  if (!valid) return;
  if (!is_q && slot < 0) return;  // padding row: nothing to append
  const bf16* src = p.qkv + static_cast<int64_t>(token) * (hq + 2 * hkv) * d + static_cast<int64_t>(head) * d;
  if (is_q)
    norm_rope_head(rope, src, p.q_out + (static_cast<int64_t>(token) * hq + head) * d, d, p.eps);
  else if (!is_v)
    norm_rope_head(rope, src, p.k_cache + (slot * hkv + (head - hq)) * d, d, p.eps);
  else
    copy_head(src, p.v_cache + (slot * hkv + (head - hq - hkv)) * d, d);
}

}  // namespace

void set_rope_inv_freq(float (&inv_freq)[kRopeMaxHeadDim / 2], int head_dim, double theta) {
  for (int i = 0; i < head_dim / 2 && i < kRopeMaxHeadDim / 2; ++i)
    inv_freq[i] =
        1.0f / std::pow(static_cast<float>(theta), static_cast<float>(2 * i) / static_cast<float>(head_dim));
}

void launch_qk_norm_rope_kv(const QkNormRopeKvParams& p, cudaStream_t stream, const LaunchPolicy& policy) {
  const int heads = p.num_q_heads + 2 * p.num_kv_heads;
  const dim3 grid(p.tokens, (heads + kWarpsPerBlock - 1) / kWarpsPerBlock);
  launch(policy, Site::kQkNormRopeKv, Pdl::kEnrolled, qk_norm_rope_kv_kernel, grid,
         dim3(kWarpsPerBlock * kWarpSize), 0, stream, p);
}

}  // namespace tpserve::kernels
