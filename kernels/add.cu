// Elementwise add in 16-byte vectors (grid-stride), with a scalar tail.
#include <algorithm>

#include "kernels/add.h"
#include "kernels/device_common.cuh"
#include "kernels/launch.h"
#include "kernels/pdl.cuh"

namespace tpserve::kernels {
namespace {

constexpr int kThreads = 256;

__global__ void add_kernel(const AddParams p) {
  pdl_wait_then_trigger();
  const int64_t vectors = p.n / kBf16PerVec;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (int64_t v = first; v < vectors; v += stride) {
    float a[kBf16PerVec], b[kBf16PerVec];
    unpack_bf16x8(load_vec(p.inout + v * kBf16PerVec), a);
    unpack_bf16x8(load_vec(p.x + v * kBf16PerVec), b);
#pragma unroll
    for (int j = 0; j < kBf16PerVec; ++j) a[j] += b[j];
    store_vec(p.inout + v * kBf16PerVec, pack_bf16x8(a));
  }
  for (int64_t i = vectors * kBf16PerVec + first; i < p.n; i += stride)
    p.inout[i] = __float2bfloat16(__bfloat162float(p.inout[i]) + __bfloat162float(p.x[i]));
}

}  // namespace

void launch_add(const AddParams& p, cudaStream_t stream, const LaunchPolicy& policy) {
  const int64_t vectors = (p.n + kBf16PerVec - 1) / kBf16PerVec;
  const int64_t blocks = std::min<int64_t>((vectors + kThreads - 1) / kThreads, 4096);
  launch(policy, Site::kAdd, Pdl::kEnrolled, add_kernel, dim3(static_cast<unsigned>(blocks)), dim3(kThreads),
         0, stream, p);
}

}  // namespace tpserve::kernels
