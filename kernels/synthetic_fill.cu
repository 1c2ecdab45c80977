// One thread per output element (grid-stride): its source index from the slice, then the shared value
// function, rounded to bf16 as the host does (round to nearest even).
#include <algorithm>

#include "common/error.h"
#include "kernels/launch.h"
#include "kernels/synthetic_fill.h"

namespace tpserve::kernels {
namespace {

constexpr int kThreads = 256;

__global__ void synthetic_fill_kernel(const SyntheticFillParams p) {
  const SyntheticSlice& s = p.slice;
  const int64_t n = s.size[0] * s.size[1] * s.size[2];
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < n; j += stride) {
    const int64_t i2 = j % s.size[2], r = j / s.size[2];
    const int64_t i1 = r % s.size[1], i0 = r / s.size[1];
    const int64_t src =
        (s.begin[0] + i0) * p.stride[0] + (s.begin[1] + i1) * p.stride[1] + (s.begin[2] + i2) * p.stride[2];
    p.out[j] = __float2bfloat16_rn(synthetic_value(s.key, s.offset, s.scale, src));
  }
}

}  // namespace

SyntheticFillParams make_synthetic_fill_params(bf16* out, const SyntheticSlice& slice) {
  TPS_CHECK(slice.ndim >= 1 && slice.ndim <= 3, "synthetic fill: ", slice.ndim, "-D tensor");
  SyntheticFillParams p;
  p.out = out;
  p.slice = slice;
  const int pad = 3 - slice.ndim;
  for (int d = 0; d < 3; ++d) {
    const bool real = d >= pad;
    p.slice.shape[d] = real ? slice.shape[d - pad] : 1;
    p.slice.begin[d] = real ? slice.begin[d - pad] : 0;
    p.slice.size[d] = real ? slice.size[d - pad] : 1;
    TPS_CHECK(p.slice.begin[d] >= 0 && p.slice.size[d] >= 0 &&
                  p.slice.begin[d] + p.slice.size[d] <= p.slice.shape[d],
              "synthetic fill: slice out of bounds in dimension ", d);
  }
  p.slice.ndim = 3;
  p.stride[2] = 1;
  p.stride[1] = p.slice.shape[2];
  p.stride[0] = p.slice.shape[1] * p.slice.shape[2];
  return p;
}

void launch_synthetic_fill(const SyntheticFillParams& p, cudaStream_t stream, const LaunchPolicy& policy) {
  const int64_t n = p.slice.numel();
  if (n == 0) return;
  const int64_t blocks = std::min<int64_t>((n + kThreads - 1) / kThreads, 65536);
  launch(policy, Site::kWeightFill, Pdl::kNever, synthetic_fill_kernel, dim3(static_cast<unsigned>(blocks)),
         dim3(kThreads), 0, stream, p);
}

}  // namespace tpserve::kernels
