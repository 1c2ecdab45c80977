// Row gather of any element type: out[r] = x[rows[r]] (e.g. the hidden states of the sampled tokens).
#pragma once

#include "kernels/kernel_api.h"

namespace tpserve::kernels {

struct GatherRowsParams {
  const void* x = nullptr;        // [T, row_bytes]
  const int32_t* rows = nullptr;  // [R] row indices into x, each in [0, T)
  void* out = nullptr;            // [R, row_bytes]
  int num_rows = 0;               // R
  int64_t row_bytes = 0;
};

void launch_gather_rows(const GatherRowsParams& p, cudaStream_t stream, const LaunchPolicy& policy);

}  // namespace tpserve::kernels
