// Skinny matrix product for decode: out[M, N] = x[M, K] * w[N, K]^T with M <= kGemvMaxTokens, bf16 in,
// fp32 accumulation on tensor cores, bf16 or f32 out. Each weight byte is read once whatever M is, so the
// product runs at the memory-bandwidth floor where cuBLASLt's tiles (M padded to 64+) do not.
#pragma once

#include "kernels/kernel_api.h"

namespace tpserve::kernels {

inline constexpr int kGemvMaxTokens = 16;

struct GemvParams {
  const bf16* x = nullptr;   // [M, K] activations
  const bf16* w = nullptr;   // [N, K] weights ([out, in] as in checkpoints)
  bf16* out_bf16 = nullptr;  // [M, N], or
  float* out_f32 = nullptr;  // [M, N] (exactly one of the two is set)
  int m = 0;                 // M, 1..kGemvMaxTokens
  int n = 0;                 // N
  int k = 0;                 // K, a multiple of 8
};

void launch_gemv(const GemvParams& p, cudaStream_t stream, const LaunchPolicy& policy);

}  // namespace tpserve::kernels
