// Fused MoE expert kernels on tensor cores (kernels/mma_tile.cuh). Grid: (row tile of 16 weight rows, work
// item); blocks past the step's number of work items exit at once, so the grid can be sized for the worst
// case. Each block's warps split K and the block sums their tiles in a fixed order.
//   gate_up: a block owns 8 intermediate rows; its tile's rows are gate rows i..i+7 (A rows 0-7) and up
//            rows i..i+7 (A rows 8-15), so each thread ends with gate and up of the same (row, column) and
//            applies silu(gate) * up in registers.
//   down:    a block owns 16 output rows of the expert's down projection.
#include <type_traits>

#include "kernels/launch.h"
#include "kernels/mma_tile.cuh"
#include "kernels/moe_align.h"
#include "kernels/moe_experts.h"
#include "kernels/topk_gating.cuh"

namespace tpserve::kernels {
namespace {

constexpr int kWarps = 4;
constexpr int kUnroll = 4;
constexpr int kNt = kMoeTileTokens / kMmaCols;  // n-tiles per work item
static_assert(kNt == 2);

struct WorkItem {
  int expert, first, count;
};

__device__ __forceinline__ WorkItem work_item(const MoeExpertsParams& p) {
  const int32_t* w = p.work + 3 * blockIdx.y;
  return {w[0], w[1], w[2]};
}

// Assignment in column `col` of the work item (`sorted`: moe_align's list, in global or shared memory), or
// -1.
__device__ __forceinline__ int assignment(const int32_t* sorted, const WorkItem& w, int col) {
  return col < w.count ? sorted[w.first + col] : -1;
}

template <int NT>
__device__ void gate_up_tile(const MoeExpertsParams& p, const int32_t* sorted, const WorkItem& w,
                             float* scratch) {
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize, g = lane / 4, q = lane % 4;
  const int row = blockIdx.x * 8 + g;  // intermediate row of this thread's A rows
  const int64_t expert_base = static_cast<int64_t>(w.expert) * 2 * p.inter;
  const bf16* a_lo = row < p.inter ? p.gate_up + (expert_base + row) * p.hidden : nullptr;
  const bf16* a_hi = row < p.inter ? p.gate_up + (expert_base + p.inter + row) * p.hidden : nullptr;
  const bf16* b[NT];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    const int a = assignment(sorted, w, nt * kMmaCols + g);
    b[nt] = a >= 0 ? p.x + static_cast<int64_t>(a / p.x_row_divisor) * p.hidden : nullptr;
  }
  int kb_begin, kb_end;
  split_range((p.hidden + kMmaK - 1) / kMmaK, kWarps, warp, kb_begin, kb_end);
  float acc[NT][4] = {};
  warp_tile_mma<NT, kUnroll, false>(acc, a_lo, a_hi, b, p.hidden, kb_begin, kb_end);
  reduce_warp_tiles<NT>(acc, scratch);
  if (warp != 0 || row >= p.inter) return;
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int a = assignment(sorted, w, nt * kMmaCols + 2 * q + i);
      if (a < 0) continue;
      const float gate = acc[nt][i], up = acc[nt][2 + i];
      p.act[static_cast<int64_t>(a) * p.inter + row] = __float2bfloat16(silu(gate) * up);
    }
}

template <int NT>
__device__ void down_tile(const MoeExpertsParams& p, const int32_t* sorted, const WorkItem& w,
                          float* scratch) {
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize, g = lane / 4, q = lane % 4;
  const int row_lo = blockIdx.x * kMmaRows + g, row_hi = row_lo + 8;
  const int64_t expert_base = static_cast<int64_t>(w.expert) * p.hidden;
  const bf16* a_lo = row_lo < p.hidden ? p.down + (expert_base + row_lo) * p.inter : nullptr;
  const bf16* a_hi = row_hi < p.hidden ? p.down + (expert_base + row_hi) * p.inter : nullptr;
  const bf16* b[NT];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    const int a = assignment(sorted, w, nt * kMmaCols + g);
    b[nt] = a >= 0 ? p.act + static_cast<int64_t>(a) * p.inter : nullptr;
  }
  int kb_begin, kb_end;
  split_range((p.inter + kMmaK - 1) / kMmaK, kWarps, warp, kb_begin, kb_end);
  float acc[NT][4] = {};
  warp_tile_mma<NT, kUnroll, false>(acc, a_lo, a_hi, b, p.inter, kb_begin, kb_end);
  reduce_warp_tiles<NT>(acc, scratch);
  if (warp != 0) return;
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int a = assignment(sorted, w, nt * kMmaCols + 2 * q + (i & 1));
      const int row = i < 2 ? row_lo : row_hi;
      if (a < 0 || row >= p.hidden) continue;
      const int64_t at = static_cast<int64_t>(a) * p.hidden + row;
      if (p.y_f32 != nullptr)
        p.y_f32[at] = acc[nt][i];
      else
        p.y_bf16[at] = __float2bfloat16(acc[nt][i]);
    }
}

__global__ void __launch_bounds__(kWarps* kWarpSize) moe_gate_up_kernel(const MoeExpertsParams p) {
  __shared__ float scratch[kWarps * kNt * 4 * kWarpSize];
  pdl_wait_then_trigger();
  if (static_cast<int>(blockIdx.y) >= *p.num_work) return;
  const WorkItem w = work_item(p);
  if (w.count <= kMmaCols)
    gate_up_tile<1>(p, p.sorted, w, scratch);
  else
    gate_up_tile<2>(p, p.sorted, w, scratch);
}

// gate_up with the routing in front (MoeRoutingParams): block (x, y) runs work item y, like the kernel above.
__global__ void __launch_bounds__(kWarps* kWarpSize)
    moe_routed_gate_up_kernel(const MoeExpertsParams p, const MoeRoutingParams r) {
  constexpr int kMaxA = kMoeRoutedMaxAssignments;
  static_assert(kMaxA <= kWarps * kWarpSize);
  __shared__ float scratch[kWarps * kNt * 4 * kWarpSize];
  __shared__ int expert_s[kMaxA];  // global expert of assignment a = token * k + slot
  __shared__ float weight_s[kMaxA];
  __shared__ int sorted_s[kMaxA], sorted_expert_s[kMaxA];  // local assignments by (local expert, a)
  __shared__ int starts_s[kMaxA];                          // 1 where a work item starts in sorted_s
  __shared__ WorkItem item_s;
  pdl_wait_then_trigger();
  const int tid = threadIdx.x, lane = tid % kWarpSize, warp = tid / kWarpSize;
  const int assignments = r.tokens * r.k;
  for (int t = warp; t < r.tokens; t += kWarps) {
    float weight[kGatingMaxK];
    int id[kGatingMaxK];
    warp_topk_gating(r.router_logits + static_cast<int64_t>(t) * r.num_experts_all, r.num_experts_all, r.k,
                     r.renormalize, weight, id);
#pragma unroll
    for (int j = 0; j < kGatingMaxK; ++j)
      if (j < r.k && lane == j) expert_s[t * r.k + j] = id[j], weight_s[t * r.k + j] = weight[j];
  }
  __syncthreads();
  auto local_expert = [&](int a) {
    const int e = expert_s[a] - r.expert_begin;
    return e >= 0 && e < r.num_experts ? e : -1;
  };
  // Place of each local assignment in (local expert, assignment) order.
  const int mine = tid < assignments ? local_expert(tid) : -1;
  if (mine >= 0) {
    int place = 0;
    for (int a = 0; a < assignments; ++a) {
      const int e = local_expert(a);
      place += e >= 0 && (e < mine || (e == mine && a < tid));
    }
    sorted_s[place] = tid;
    sorted_expert_s[place] = mine;
  }
  const int local = __syncthreads_count(mine >= 0);
  // Work items: each expert's run of sorted_s, cut every kMoeTileTokens assignments.
  bool starts = false;
  int expert = -1, run_first = tid;
  if (tid < local) {
    expert = sorted_expert_s[tid];
    while (run_first > 0 && sorted_expert_s[run_first - 1] == expert) --run_first;
    starts = (tid - run_first) % kMoeTileTokens == 0;
    starts_s[tid] = starts;
  }
  const int num_work = __syncthreads_count(starts);
  const bool writer = blockIdx.x == 0 && blockIdx.y == 0;
  if (starts) {
    int index = 0;
    for (int s = 0; s < tid; ++s) index += starts_s[s];
    int count = 1;
    while (count < kMoeTileTokens && tid + count < local && sorted_expert_s[tid + count] == expert) ++count;
    if (index == static_cast<int>(blockIdx.y)) item_s = {expert, tid, count};
    if (writer) {
      r.work[3 * index] = expert;
      r.work[3 * index + 1] = tid;
      r.work[3 * index + 2] = count;
    }
  }
  if (writer) {
    if (tid < assignments) r.ids[tid] = expert_s[tid], r.weights[tid] = weight_s[tid];
    if (tid < local) r.sorted[tid] = sorted_s[tid];
    if (tid == 0) *r.num_work = num_work;
  }
  __syncthreads();
  if (static_cast<int>(blockIdx.y) >= num_work) return;
  const WorkItem w = item_s;
  if (w.count <= kMmaCols)
    gate_up_tile<1>(p, sorted_s, w, scratch);
  else
    gate_up_tile<2>(p, sorted_s, w, scratch);
}

__global__ void __launch_bounds__(kWarps* kWarpSize) moe_down_kernel(const MoeExpertsParams p) {
  __shared__ float scratch[kWarps * kNt * 4 * kWarpSize];
  pdl_wait_then_trigger();
  if (static_cast<int>(blockIdx.y) >= *p.num_work) return;
  const WorkItem w = work_item(p);
  if (w.count <= kMmaCols)
    down_tile<1>(p, p.sorted, w, scratch);
  else
    down_tile<2>(p, p.sorted, w, scratch);
}

void launch_down(const MoeExpertsParams& p, cudaStream_t stream, const LaunchPolicy& policy) {
  const dim3 grid((p.hidden + kMmaRows - 1) / kMmaRows, p.max_work);
  launch(policy, Site::kMoeExperts, Pdl::kEnrolled, moe_down_kernel, grid, dim3(kWarps * kWarpSize), 0,
         stream, p);
}

dim3 gate_up_grid(const MoeExpertsParams& p) {
  return dim3((p.inter + 7) / 8, p.max_work);
}

}  // namespace

void launch_moe_experts(const MoeExpertsParams& p, cudaStream_t stream, const LaunchPolicy& policy) {
  launch(policy, Site::kMoeExperts, Pdl::kEnrolled, moe_gate_up_kernel, gate_up_grid(p),
         dim3(kWarps * kWarpSize), 0, stream, p);
  launch_down(p, stream, policy);
}

void launch_moe_routed_experts(const MoeRoutingParams& r, const MoeExpertsParams& e, cudaStream_t stream,
                               const LaunchPolicy& policy) {
  launch(policy, Site::kMoeExperts, Pdl::kEnrolled, moe_routed_gate_up_kernel, gate_up_grid(e),
         dim3(kWarps * kWarpSize), 0, stream, e, r);
  launch_down(e, stream, policy);
}

}  // namespace tpserve::kernels
