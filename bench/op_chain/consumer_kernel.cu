// op_chain's consumer kernel and its three launches. Grid (column chunk, token), 128 threads, 8 bf16 columns
// a thread, slots summed in order in fp32 (as kernels/moe_combine.cu).
#include "bench/op_chain/consumer_kernel.h"
#include "common/cuda_check.h"
#include "kernels/device_common.cuh"
#include "kernels/pdl.cuh"

namespace tpserve::bench {
namespace {

constexpr int kThreads = 128;

__global__ void op_chain_consumer_kernel(const ConsumerParams p) {
  kernels::pdl_wait();  // ids, weights and x were written by predecessors
  const int token = blockIdx.y;
  const int vec = blockIdx.x * blockDim.x + threadIdx.x;
  if (vec * kernels::kBf16PerVec >= p.hidden) return;
  const int64_t col = static_cast<int64_t>(vec) * kernels::kBf16PerVec;
  float sum[kernels::kBf16PerVec];
  kernels::unpack_bf16x8(kernels::load_vec(p.x + static_cast<int64_t>(token) * p.hidden + col), sum);
  for (int j = 0; j < p.k; ++j) {
    const int64_t slot = static_cast<int64_t>(token) * p.k + j;
    const int64_t row = p.ids[slot];
    if (row < 0 || row >= p.experts) continue;  // never from gating on finite logits; guards the read
    const float w = p.weights[slot];
    float y[kernels::kBf16PerVec];
    kernels::unpack_bf16x8(kernels::load_vec(p.table + row * p.hidden + col), y);
#pragma unroll
    for (int i = 0; i < kernels::kBf16PerVec; ++i) sum[i] += w * y[i];
  }
  kernels::store_vec(p.out + static_cast<int64_t>(token) * p.hidden + col, kernels::pack_bf16x8(sum));
  kernels::pdl_trigger();
}

}  // namespace

void launch_consumer(const ConsumerParams& p, LaunchMode mode, cudaStream_t stream) {
  const int vectors = p.hidden / kernels::kBf16PerVec;
  const dim3 grid((vectors + kThreads - 1) / kThreads, p.tokens), block(kThreads);
  if (grid.x == 0 || grid.y == 0) return;
  if (mode == LaunchMode::kChevron) {
    op_chain_consumer_kernel<<<grid, block, 0, stream>>>(p);
    CUDA_CHECK(cudaGetLastError());
    return;
  }
  // The same configuration as kernels/launch.h builds; the attribute only in kExPdl.
  cudaLaunchAttribute attributes[1] = {};
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = 0;
  config.stream = stream;
  config.attrs = attributes;
  config.numAttrs = 0;
  if (mode == LaunchMode::kExPdl) {
    attributes[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attributes[0].val.programmaticStreamSerializationAllowed = 1;
    config.numAttrs = 1;
  }
  CUDA_CHECK(cudaLaunchKernelEx(&config, op_chain_consumer_kernel, p));
  CUDA_CHECK(cudaGetLastError());
}

const void* consumer_kernel_address() {
  return reinterpret_cast<const void*>(op_chain_consumer_kernel);
}

}  // namespace tpserve::bench
