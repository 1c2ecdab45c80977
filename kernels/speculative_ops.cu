// One thread per element; see speculative_ops.h.
#include "kernels/launch.h"
#include "kernels/pdl.cuh"
#include "kernels/speculative_ops.h"

namespace tpserve::kernels {
namespace {

constexpr int kThreads = 128;
dim3 grid_for(int n) {
  return dim3((n + kThreads - 1) / kThreads > 0 ? (n + kThreads - 1) / kThreads : 1);
}

__global__ void resolve_tokens_kernel(const ResolveTokensParams p) {
  pdl_wait_then_trigger();
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < p.n && p.ids[i] < 0) {
    const int t = -p.ids[i] - 1;
    p.ids[i] = t < p.table_size ? p.table[t] : -1;
  }
}

__global__ void add_i32_kernel(const AddI32Params p) {
  pdl_wait_then_trigger();
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < p.n) p.out[i] = p.a[i] + p.b[i] + p.c;
}

__global__ void scatter_i32_kernel(const ScatterI32Params p) {
  pdl_wait_then_trigger();
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < p.n) {
    const int at = p.index[i];
    if (at >= 0 && at < p.table_size) p.table[at] = p.values[i];
  }
}

__global__ void draft_step_meta_kernel(const DraftStepMetaParams p) {
  pdl_wait_then_trigger();
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < p.n) {
    const int pos = p.positions[i];
    const int block = pos / p.block_size;
    // A position past the table (cannot happen: the scheduler reserves 2k ahead) writes nowhere.
    p.slot_mapping[i] =
        block < p.width ? p.block_tables[i * p.width + block] * p.block_size + pos % p.block_size : -1;
    p.context_lens[i] = pos + 1;
  }
}

}  // namespace

void launch_resolve_tokens(const ResolveTokensParams& p, cudaStream_t stream, const LaunchPolicy& policy) {
  launch(policy, Site::kMtpVerify, Pdl::kEnrolled, resolve_tokens_kernel, grid_for(p.n), dim3(kThreads), 0,
         stream, p);
}
void launch_add_i32(const AddI32Params& p, cudaStream_t stream, const LaunchPolicy& policy) {
  launch(policy, Site::kMtpVerify, Pdl::kEnrolled, add_i32_kernel, grid_for(p.n), dim3(kThreads), 0, stream,
         p);
}
void launch_scatter_i32(const ScatterI32Params& p, cudaStream_t stream, const LaunchPolicy& policy) {
  launch(policy, Site::kMtpVerify, Pdl::kEnrolled, scatter_i32_kernel, grid_for(p.n), dim3(kThreads), 0,
         stream, p);
}
void launch_draft_step_meta(const DraftStepMetaParams& p, cudaStream_t stream, const LaunchPolicy& policy) {
  launch(policy, Site::kMtpVerify, Pdl::kEnrolled, draft_step_meta_kernel, grid_for(p.n), dim3(kThreads), 0,
         stream, p);
}

}  // namespace tpserve::kernels
