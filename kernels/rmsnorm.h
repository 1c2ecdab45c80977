// RMSNorm per row, optionally fused with the residual add that precedes it:
//   residual == nullptr:  out = w * x / sqrt(mean(x^2) + eps)
//   residual != nullptr:  residual += x (stored in bf16); out = w * r / sqrt(mean(r^2) + eps) of that sum
#pragma once

#include "kernels/kernel_api.h"

namespace tpserve::kernels {

struct RmsNormParams {
  const bf16* x = nullptr;       // [T, H]
  bf16* residual = nullptr;      // [T, H] or nullptr (no add)
  const bf16* weight = nullptr;  // [H]
  bf16* out = nullptr;           // [T, H]
  int tokens = 0;                // T
  int hidden = 0;                // H, a multiple of 8, at most kRmsNormMaxHidden
  float eps = 1e-6f;
};

inline constexpr int kRmsNormMaxHidden = 32768;

void launch_rmsnorm(const RmsNormParams& p, cudaStream_t stream, const LaunchPolicy& policy);

}  // namespace tpserve::kernels
