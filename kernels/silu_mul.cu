// silu(g) * u per element: blocks over (column chunk, row), 16-byte vectors when I is a multiple of 8.
#include <algorithm>

#include "kernels/device_common.cuh"
#include "kernels/launch.h"
#include "kernels/pdl.cuh"
#include "kernels/silu_mul.h"

namespace tpserve::kernels {
namespace {

constexpr int kThreads = 128;

__global__ void silu_mul_kernel(const SiluMulParams p) {
  pdl_wait_then_trigger();
  const int64_t row = blockIdx.y;
  const bf16* gate = p.gate_up + row * 2 * p.inter;
  const bf16* up = gate + p.inter;
  bf16* out = p.out + row * p.inter;
  if (p.inter % kBf16PerVec == 0) {
    const int vectors = p.inter / kBf16PerVec;
    for (int v = blockIdx.x * blockDim.x + threadIdx.x; v < vectors; v += gridDim.x * blockDim.x) {
      float g[kBf16PerVec], u[kBf16PerVec];
      unpack_bf16x8(load_vec(gate + v * kBf16PerVec), g);
      unpack_bf16x8(load_vec(up + v * kBf16PerVec), u);
#pragma unroll
      for (int j = 0; j < kBf16PerVec; ++j) g[j] = silu(g[j]) * u[j];
      store_vec(out + v * kBf16PerVec, pack_bf16x8(g));
    }
  } else {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < p.inter; i += gridDim.x * blockDim.x)
      out[i] = __float2bfloat16(silu(__bfloat162float(gate[i])) * __bfloat162float(up[i]));
  }
}

}  // namespace

void launch_silu_mul(const SiluMulParams& p, cudaStream_t stream, const LaunchPolicy& policy) {
  const int vectors = (p.inter + kBf16PerVec - 1) / kBf16PerVec;
  const int chunks = std::min((vectors + kThreads - 1) / kThreads, 64);
  launch(policy, Site::kSiluMul, Pdl::kEnrolled, silu_mul_kernel, dim3(chunks, p.tokens), dim3(kThreads), 0,
         stream, p);
}

}  // namespace tpserve::kernels
