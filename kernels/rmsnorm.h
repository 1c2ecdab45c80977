// RMSNorm per row, optionally fused with the residual add that precedes it:
//   residual == nullptr:  out = w * x / sqrt(mean(x^2) + eps)
//   residual != nullptr:  residual += x (stored in bf16); out = w * r / sqrt(mean(r^2) + eps) of that sum
#pragma once

#include "kernels/kernel_api.h"
#include "kernels/moe_combine.h"

namespace tpserve::kernels {

struct RmsNormParams {
  const bf16* x = nullptr;       // [T, H], or nullptr with combine set:
  bf16* residual = nullptr;      // [T, H] or nullptr (no add)
  const bf16* weight = nullptr;  // [H]
  bf16* out = nullptr;           // [T, H]
  int tokens = 0;                // T
  int hidden = 0;                // H, a multiple of 8, at most kRmsNormMaxHidden
  float eps = 1e-6f;
  // The norm weights are read into registers before the PDL wait (during the predecessor's tail) instead of
  // after the row's sum of squares; false: the earlier order (for A/B; same results).
  bool weights_before_wait = true;
  // x from the MoE combine (combine.k > 0, x == nullptr): x[t] = bf16 of moe_combine's sum for token t (its
  // out left unused), so that the combine and the residual add + RMSNorm after it are one launch. H at most
  // kRmsNormCombineMaxHidden.
  MoeCombineParams combine;
  // With combine: the token's routing (combine.topk_ids, origin, weights; k <= kCombineSlotsAtOnce) is read
  // before the PDL wait, and only the expert rows after it. The caller's part: the launch right before this
  // one (the MoE down kernel) does not write the routing (gating and moe_align run before gate_up).
  bool combine_routing_before_wait = true;
};

inline constexpr int kRmsNormMaxHidden = 32768;
inline constexpr int kRmsNormCombineMaxHidden = 8192;  // with combine set

void launch_rmsnorm(const RmsNormParams& p, cudaStream_t stream, const LaunchPolicy& policy);

}  // namespace tpserve::kernels
