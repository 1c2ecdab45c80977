// MoE align: one block counts assignments per expert in shared memory, scans the counts into group offsets
// and work-item offsets, writes the work items, then places every assignment in its expert's group.
#include "kernels/device_common.cuh"
#include "kernels/launch.h"
#include "kernels/moe_align.h"
#include "kernels/pdl.cuh"

namespace tpserve::kernels {
namespace {

constexpr int kThreads = 1024;
static_assert(kMoeMaxExperts <= kThreads);

__global__ void __launch_bounds__(kThreads) moe_align_kernel(const MoeAlignParams p) {
  __shared__ int count_s[kMoeMaxExperts], cursor_s[kMoeMaxExperts];
  __shared__ int warp_totals[kThreads / kWarpSize];
  pdl_wait_then_trigger();
  const int tid = threadIdx.x;
  for (int e = tid; e < p.num_experts; e += kThreads) count_s[e] = 0;
  __syncthreads();
  for (int a = tid; a < p.num_assignments; a += kThreads) {
    const int e = p.expert_of[a] - p.expert_begin;
    if (e >= 0 && e < p.num_experts) atomicAdd(&count_s[e], 1);
  }
  __syncthreads();
  const int count = tid < p.num_experts ? count_s[tid] : 0;
  int assignments_total, work_total;
  const int first = block_exclusive_scan<kThreads>(count, warp_totals, assignments_total);
  const int tiles = (count + kMoeTileTokens - 1) / kMoeTileTokens;
  const int first_work = block_exclusive_scan<kThreads>(tiles, warp_totals, work_total);
  if (tid < p.num_experts) {
    cursor_s[tid] = first;
    for (int i = 0; i < tiles && first_work + i < p.max_work; ++i) {
      int32_t* w = p.work + 3 * (first_work + i);
      w[0] = tid;
      w[1] = first + i * kMoeTileTokens;
      w[2] = min(kMoeTileTokens, count - i * kMoeTileTokens);
    }
  }
  if (tid == 0) *p.num_work = min(work_total, p.max_work);
  __syncthreads();
  for (int a = tid; a < p.num_assignments; a += kThreads) {
    const int e = p.expert_of[a] - p.expert_begin;
    if (e >= 0 && e < p.num_experts) p.sorted[atomicAdd(&cursor_s[e], 1)] = a;
  }
}

}  // namespace

void launch_moe_align(const MoeAlignParams& p, cudaStream_t stream, const LaunchPolicy& policy) {
  launch(policy, Site::kMoeAlign, Pdl::kEnrolled, moe_align_kernel, dim3(1), dim3(kThreads), 0, stream, p);
}

}  // namespace tpserve::kernels
