// SwiGLU activation of a dense MLP: out[t, i] = silu(gate_up[t, i]) * gate_up[t, I + i].
#pragma once

#include "kernels/kernel_api.h"

namespace tpserve::kernels {

struct SiluMulParams {
  const bf16* gate_up = nullptr;  // [T, 2I]
  bf16* out = nullptr;            // [T, I]
  int tokens = 0;                 // T
  int inter = 0;                  // I
};

void launch_silu_mul(const SiluMulParams& p, cudaStream_t stream, const LaunchPolicy& policy);

}  // namespace tpserve::kernels
