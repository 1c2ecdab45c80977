// Elementwise residual add: inout += x (bf16 storage, fp32 add).
#pragma once

#include "kernels/kernel_api.h"

namespace tpserve::kernels {

struct AddParams {
  bf16* inout = nullptr;    // [n]
  const bf16* x = nullptr;  // [n]
  int64_t n = 0;
};

void launch_add(const AddParams& p, cudaStream_t stream, const LaunchPolicy& policy);

}  // namespace tpserve::kernels
