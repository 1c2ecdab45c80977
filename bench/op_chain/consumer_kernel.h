// The consumer of op_chain's routing chain: the kernel after top-k gating in each layer, launched in one of
// three ways (LaunchMode). It is the benchmark's own kernel, not kernels/moe_combine.cu, because the three
// launches must be written out here: kernels/launch.h always uses cudaLaunchKernelEx and decides the PDL
// attribute by policy, while this benchmark measures the launch mechanism itself (<<<>>>, LaunchKernelEx
// with and without the attribute), and tpserve's kernels are private to their .cu files. It is shaped like
// moe_combine (same grid, same bytes per token) and reads what gating wrote:
//   out[t, :] = x[t, :] + sum over slots j (in order) of weights[t, j] * table[ids[t, j], :]
// Enrolled in PDL whole: pdl_wait() before its first read of ids, weights or x, pdl_trigger() after its
// writes, no __restrict__/__ldg on them, so all three launches are correct.
#pragma once

#include "bench/op_chain/chain_options.h"
#include "kernels/kernel_api.h"

namespace tpserve::bench {

struct ConsumerParams {
  const kernels::bf16* x = nullptr;      // [T, H] the layer's input hidden state
  const kernels::bf16* table = nullptr;  // [E, H] one row per expert (weights: no predecessor writes them)
  const float* weights = nullptr;        // [T, k] from top-k gating
  const int32_t* ids = nullptr;          // [T, k] from top-k gating; slots outside [0, E) are skipped
  kernels::bf16* out = nullptr;          // [T, H] the next layer's input
  int tokens = 0;                        // T
  int experts = 0;                       // E
  int k = 0;
  int hidden = 0;  // H, a multiple of 8
};

// Launches the consumer on `stream` as `mode` says; checks the launch (CUDA_CHECK).
void launch_consumer(const ConsumerParams& p, LaunchMode mode, cudaStream_t stream);

// The kernel's address, for reports (cudaFuncGetName) and tests.
const void* consumer_kernel_address();

}  // namespace tpserve::bench
