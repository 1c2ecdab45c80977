// Synthetic weights generated where they live: out[j] = the bf16 value of element j of a slice of a synthetic
// tensor (common/synthetic_value.h), the same bits the host generator gives. Load time only.
#pragma once

#include "common/synthetic_value.h"
#include "kernels/kernel_api.h"

namespace tpserve::kernels {

struct SyntheticFillParams {
  bf16* out = nullptr;     // [slice.numel()], row-major over slice.size
  SyntheticSlice slice;    // dimensions right-aligned to 3 (leading sizes 1)
  int64_t stride[3] = {};  // of the whole tensor, row-major
};

// Right-aligns `slice` to 3 dimensions and computes the strides.
SyntheticFillParams make_synthetic_fill_params(bf16* out, const SyntheticSlice& slice);
void launch_synthetic_fill(const SyntheticFillParams& p, cudaStream_t stream, const LaunchPolicy& policy);

}  // namespace tpserve::kernels
