// The residual add + RMSNorm before an MoE block, its router and the top-k gating in one launch (decode,
// up to kRouterFusedMaxTokens tokens, E <= kRouterFusedMaxExperts): one thread-block cluster of
// kRouterClusterBlocks blocks, each owning 16 experts' router rows, staged in shared memory before the PDL
// wait. After the wait every block computes the norm of all rows itself (same code, same bits in every
// block), its experts' logits on tensor cores; the logits meet in block 0's shared memory (pushed there by
// each block, or gathered by block 0: RouterFusedParams::push_logits), block 0 runs the gating (one warp a
// token) and stores the logits, and the blocks store the columns of the residual and the norm
// (push_logits and stores_after_gather say which blocks, and when).
#pragma once

#include "kernels/kernel_api.h"

namespace tpserve::kernels {

inline constexpr int kRouterClusterBlocks = 8;
inline constexpr int kRouterFusedMaxExperts = 16 * kRouterClusterBlocks;  // 16 router rows a block
inline constexpr int kRouterFusedMaxTokens = 16;

struct RouterFusedParams {
  const bf16* x = nullptr;            // [T, H] the layer's attention output
  bf16* residual = nullptr;           // [T, H] += x (stored in bf16)
  const bf16* norm_weight = nullptr;  // [H]
  bf16* normed = nullptr;             // [T, H] weight * rmsnorm(residual)
  float eps = 1e-6f;
  const bf16* router = nullptr;  // [E, H]
  float* logits = nullptr;       // [T, E] f32, normed * router^T
  float* weights = nullptr;      // [T, k] top-k probabilities, renormalised when asked
  int32_t* ids = nullptr;        // [T, k] expert indices, most probable first (ties to the smaller index)
  int tokens = 0;                // T, 1..kRouterFusedMaxTokens
  int hidden = 0;                // H, a multiple of 32
  int experts = 0;               // E, k..kRouterFusedMaxExperts
  int k = 0;                     // 1..min(E, kGatingMaxK)
  bool renormalize = false;
  // Blocks 1..7 store the residual and normed columns after block 0 has gathered the logits, while it gates
  // (block 0 stores none); false: every block stores an eighth between the two cluster barriers, alongside
  // block 0's gather, so block 0 gates after the slowest block's stores (the same results).
  bool stores_after_gather = false;
  // Each block stores its logits into block 0's shared memory itself (distributed shared memory), so that
  // one cluster barrier replaces the second barrier and block 0's gather; blocks 1..7 then store the columns
  // as with stores_after_gather (which it overrides). The same results.
  bool push_logits = false;
  // The gating's arg-max rounds reduce with redux.sync (TopkGatingParams::redux).
  bool redux_gating = false;
  // The gating's rounds on the logits' order (TopkGatingParams::by_logits).
  bool gating_by_logits = true;
  // Weight copies into shared memory under the L2 evict_first hint (kernels/device_common.cuh StreamHint;
  // runtime.weights_l2_evict_first); register loads stay plain.
  bool weights_evict_first = false;
};

// Whether the fused router runs on the current device: clusters (SM90+), and its kernel compiled for SM90+
// (below, its body is a trap). device_sm: e.g. 90.
bool router_fused_available(int device_sm);

// Whether p's shape is within the limits above (T, E, k, H); what launch_router_fused requires.
bool router_fused_fits(const RouterFusedParams& p);

// Shared memory a block of the fused router needs for `p`'s shape (the launch needs it within the device's
// opt-in limit).
size_t router_fused_smem_bytes(const RouterFusedParams& p);

// Launches the fused router (SM90+: clusters); p must fit (router_fused_fits).
void launch_router_fused(const RouterFusedParams& p, size_t smem, cudaStream_t stream,
                         const LaunchPolicy& policy);

}  // namespace tpserve::kernels
