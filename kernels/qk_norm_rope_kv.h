// Attention prologue in one kernel: from the fused qkv projection, per-head RMSNorm of q and k, RoPE (neox
// half split) at each token's position, k and v appended to the paged cache at the token's slot; q out.
#pragma once

#include "kernels/kernel_api.h"

namespace tpserve::kernels {

inline constexpr int kRopeMaxHeadDim = 256;

struct QkNormRopeKvParams {
  const bf16* qkv = nullptr;              // [T, (Hq + 2 Hkv) * D]: q heads, then k heads, then v heads
  const bf16* q_norm_weight = nullptr;    // [D]
  const bf16* k_norm_weight = nullptr;    // [D]
  const int32_t* positions = nullptr;     // [T]
  const int32_t* slot_mapping = nullptr;  // [T] block * block_size + offset; < 0 = padding (no cache write)
  bf16* q_out = nullptr;                  // [T, Hq * D]
  bf16* k_cache = nullptr;                // [num_blocks, block_size, Hkv, D]
  bf16* v_cache = nullptr;                // [num_blocks, block_size, Hkv, D]
  int tokens = 0;                         // T
  int num_q_heads = 0;                    // Hq
  int num_kv_heads = 0;                   // Hkv
  int head_dim = 0;                       // D, even, <= kRopeMaxHeadDim
  float eps = 1e-6f;
  // positions, slot_mapping, the norm weights (and the RoPE sin / cos of the positions) are read before the
  // PDL wait, during the predecessor's tail; false: right after it (for A/B; same results). So positions
  // and slot_mapping must not be written by the launch right before this one (kernels/pdl.cuh); in a step
  // they are step inputs, or written by draft_step_meta before the QKV projection that precedes this.
  bool loads_before_wait = true;
  // inv_freq[i] = 1 / theta^(2i / D) for i < D / 2, computed in fp32 on the host exactly as the CPU
  // reference does, so both backends rotate by the same angles.
  float inv_freq[kRopeMaxHeadDim / 2] = {};
};

// inv_freq[i] = 1 / theta^(2i / head_dim) for i < head_dim / 2 (QkNormRopeKvParams::inv_freq, and the
// decode attention's folded-in prologue, kernels/paged_attention.h).
void set_rope_inv_freq(float (&inv_freq)[kRopeMaxHeadDim / 2], int head_dim, double theta);

void launch_qk_norm_rope_kv(const QkNormRopeKvParams& p, cudaStream_t stream, const LaunchPolicy& policy);

}  // namespace tpserve::kernels
