// Fused MoE expert kernels on tensor cores (kernels/mma_tile.cuh). Grid: (row tile of 16 weight rows, work
// item); blocks past the step's number of work items exit at once, so the grid can be sized for the worst
// case. Each block's warps split K and the block sums their tiles in a fixed order.
//   gate_up: a block owns 8 intermediate rows; its tile's rows are gate rows i..i+7 (A rows 0-7) and up
//            rows i..i+7 (A rows 8-15), so each thread ends with gate and up of the same (row, column) and
//            applies silu(gate) * up in registers.
//   down:    a block owns 16 output rows of the expert's down projection. Staged (MoeExpertsParams::
//            stage_down): its weight rows go to shared memory whole by cp.async before the PDL wait, so
//            under PDL they stream in during gate_up's tail without holding registers.
#include <algorithm>
#include <type_traits>

#include "common/error.h"
#include "kernels/launch.h"
#include "kernels/mma_tile.cuh"
#include "kernels/moe_align.h"
#include "kernels/moe_experts.h"
#include "kernels/staged_tile.cuh"

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

// Assignment in column `col` of the work item, or -1.
__device__ __forceinline__ int assignment(const MoeExpertsParams& p, const WorkItem& w, int col) {
  return col < w.count ? p.sorted[w.first + col] : -1;
}

template <int NT>
__device__ void gate_up_tile(const MoeExpertsParams& p, const WorkItem& w, float* scratch) {
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize, g = lane / 4, q = lane % 4;
  const int row = blockIdx.x * 8 + g;  // intermediate row of this thread's A rows
  const int64_t expert_base = static_cast<int64_t>(w.expert) * 2 * p.inter;
  const bf16* a_lo = row < p.inter ? p.gate_up + (expert_base + row) * p.hidden : nullptr;
  const bf16* a_hi = row < p.inter ? p.gate_up + (expert_base + p.inter + row) * p.hidden : nullptr;
  const bf16* b[NT];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    const int a = assignment(p, w, nt * kMmaCols + g);
    b[nt] = a >= 0 ? p.x + static_cast<int64_t>(a / p.x_row_divisor) * p.hidden : nullptr;
  }
  int kb_begin, kb_end;
  split_range((p.hidden + kMmaK - 1) / kMmaK, kWarps, warp, kb_begin, kb_end);
  float acc[NT][4] = {};
  warp_tile_mma<NT, kUnroll, false>(acc, a_lo, a_hi, b, p.hidden, kb_begin, kb_end);
  reduce_warp_tiles<NT>(acc, scratch, kWarps);
  if (warp != 0 || row >= p.inter) return;
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int a = assignment(p, w, nt * kMmaCols + 2 * q + i);
      if (a < 0) continue;
      const float gate = acc[nt][i], up = acc[nt][2 + i];
      p.act[static_cast<int64_t>(a) * p.inter + row] = __float2bfloat16(silu(gate) * up);
    }
}

// Warp 0's summed down tile into y (rows row_lo / row_hi of this thread, columns = the work item's
// assignments).
template <int NT>
__device__ __forceinline__ void store_down_tile(const MoeExpertsParams& p, const WorkItem& w,
                                                const float (&acc)[NT][4], int row_lo, int row_hi, int q) {
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int a = assignment(p, w, nt * kMmaCols + 2 * q + (i & 1));
      const int row = i < 2 ? row_lo : row_hi;
      if (a < 0 || row >= p.hidden) continue;
      const int64_t at = static_cast<int64_t>(a) * p.hidden + row;
      if (p.y_f32 != nullptr)
        p.y_f32[at] = acc[nt][i];
      else
        p.y_bf16[at] = __float2bfloat16(acc[nt][i]);
    }
}

// kWaitInside: pdl_wait() after the first weight loads (inside warp_tile_mma), not before this call.
template <int NT, bool kWaitInside>
__device__ void down_tile(const MoeExpertsParams& p, const WorkItem& w, float* scratch) {
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize, g = lane / 4, q = lane % 4;
  const int row_lo = blockIdx.x * kMmaRows + g, row_hi = row_lo + 8;
  const int64_t expert_base = static_cast<int64_t>(w.expert) * p.hidden;
  const bf16* a_lo = row_lo < p.hidden ? p.down + (expert_base + row_lo) * p.inter : nullptr;
  const bf16* a_hi = row_hi < p.hidden ? p.down + (expert_base + row_hi) * p.inter : nullptr;
  const bf16* b[NT];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    const int a = assignment(p, w, nt * kMmaCols + g);
    b[nt] = a >= 0 ? p.act + static_cast<int64_t>(a) * p.inter : nullptr;
  }
  int kb_begin, kb_end;
  split_range((p.inter + kMmaK - 1) / kMmaK, kWarps, warp, kb_begin, kb_end);
  float acc[NT][4] = {};
  warp_tile_mma<NT, kUnroll, kWaitInside>(acc, a_lo, a_hi, b, p.inter, kb_begin, kb_end);
  reduce_warp_tiles<NT>(acc, scratch, kWarps);
  if (warp == 0) store_down_tile<NT>(p, w, acc, row_lo, row_hi, q);
}

// The staged down tile (MoeExpertsParams::stage_down): each warp copies its k range of the block's 16 weight
// rows into shared memory (cp.async, kernels/staged_tile.cuh) before pdl_wait(), then reads the activations;
// the rows' space takes the partial tiles afterwards. Shared memory: staged_bytes(I).
template <int NT>
__device__ void down_tile_staged(const MoeExpertsParams& p, const WorkItem& w, unsigned char* smem) {
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize, g = lane / 4, q = lane % 4;
  const int row0 = blockIdx.x * kMmaRows;
  const int64_t expert_base = static_cast<int64_t>(w.expert) * p.hidden;
  const bf16* b[NT];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    const int a = assignment(p, w, nt * kMmaCols + g);
    b[nt] = a >= 0 ? p.act + static_cast<int64_t>(a) * p.inter : nullptr;
  }
  int kb_begin, kb_end;
  split_range(p.inter / kMmaK, kWarps, warp, kb_begin, kb_end);
  bf16* tile = reinterpret_cast<bf16*>(smem);
  const int row_elems = p.inter + kStagedRowPad;
  auto row_ptr = [&](int r) -> const bf16* {  // rows past H: zero-filled, their products never stored
    return row0 + r < p.hidden ? p.down + (expert_base + row0 + r) * p.inter : nullptr;
  };
  copy_rows_async(tile, row_elems, row_ptr, p.down, kb_begin, kb_end);
  pdl_wait_then_trigger();  // the activations are gate_up's output
  cp_async_wait_all();
  __syncwarp();  // the warp's copies, visible to all its lanes
  float acc[NT][4] = {};
  mma_staged<NT, kUnroll>(acc, tile, row_elems, b, kb_begin, kb_end);
  __syncthreads();  // every warp is done with the rows: their space takes the partial tiles
  reduce_warp_tiles<NT>(acc, reinterpret_cast<float*>(smem), kWarps);
  if (warp == 0) store_down_tile<NT>(p, w, acc, row0 + g, row0 + g + 8, q);
}

// The fused combine (MoeExpertsParams::combine) of the row tile's 16 rows: the tokens' slots summed as
// moe_combine does (slot order, fp32, bf16 out); slots of experts held elsewhere contribute nothing. Rows of
// y are read from L2 (__ldcg): other blocks wrote them, and L1 is not coherent.
__device__ void combine_tile(const MoeExpertsParams& p) {
  const MoeCombineParams& c = p.combine;
  constexpr int kQuads = kMmaRows / 4;  // a thread sums 4 consecutive rows (16 bytes of y)
  const int row0 = blockIdx.x * kMmaRows;
  for (int i = threadIdx.x; i < c.tokens * kQuads; i += blockDim.x) {
    const int t = i / kQuads, row = row0 + (i % kQuads) * 4;
    if (row >= c.hidden) continue;  // H is a multiple of 8: a quad is inside H or past it whole
    float sum[4] = {};
    for (int j = 0; j < c.k; ++j) {
      const int64_t slot = static_cast<int64_t>(t) * c.k + j;
      if (c.topk_ids != nullptr) {
        const int e = c.topk_ids[slot] - c.expert_begin;
        if (e < 0 || e >= c.num_experts) continue;
      }
      const float4 y = __ldcg(reinterpret_cast<const float4*>(c.y_f32 + slot * c.hidden + row));
      const float weight = c.weights[slot];
      sum[0] += weight * y.x, sum[1] += weight * y.y, sum[2] += weight * y.z, sum[3] += weight * y.w;
    }
    *reinterpret_cast<uint2*>(c.out + static_cast<int64_t>(t) * c.hidden + row) =
        make_uint2(pack_bf16x2(sum[0], sum[1]), pack_bf16x2(sum[2], sum[3]));
  }
}

// Every block of the row tile counts its arrival once its y rows are stored; true in the last of the step's
// num_work blocks. Thread 0's fence after the barrier orders the block's stores before its count; the last
// block resets the counter to 0 for the next launch or replay.
__device__ bool last_to_arrive(const MoeExpertsParams& p, int num_work, bool& last_s) {
  __syncthreads();
  if (threadIdx.x == 0) {
    int* counter = p.combine_counters + blockIdx.x;
    __threadfence();
    const bool last = atomicAdd(counter, 1) == num_work - 1;
    if (last) atomicExch(counter, 0);
    __threadfence();  // the earlier arrivals' rows are read after their counts were seen
    last_s = last;
  }
  __syncthreads();
  return last_s;
}

__global__ void __launch_bounds__(kWarps* kWarpSize) moe_gate_up_kernel(const MoeExpertsParams p) {
  __shared__ float scratch[kWarps * kNt * 4 * kWarpSize];
  pdl_wait_then_trigger();
  if (static_cast<int>(blockIdx.y) >= *p.num_work) return;
  const WorkItem w = work_item(p);
  if (w.count <= kMmaCols)
    gate_up_tile<1>(p, w, scratch);
  else
    gate_up_tile<2>(p, w, scratch);
}

__global__ void __launch_bounds__(kWarps* kWarpSize) moe_down_kernel(const MoeExpertsParams p) {
  __shared__ float scratch[kWarps * kNt * 4 * kWarpSize];
  if (!p.down_loads_before_wait) pdl_wait_then_trigger();
  if (static_cast<int>(blockIdx.y) >= *p.num_work) {
    if (p.down_loads_before_wait) pdl_wait_then_trigger();  // every block waits before it exits
    return;
  }
  const WorkItem w = work_item(p);
  auto run = [&](auto wait_inside) {
    if (w.count <= kMmaCols)
      down_tile<1, decltype(wait_inside)::value>(p, w, scratch);
    else
      down_tile<2, decltype(wait_inside)::value>(p, w, scratch);
  };
  if (p.down_loads_before_wait)
    run(std::true_type{});
  else
    run(std::false_type{});
}

// 8 blocks an SM (their 25.6 KB tiles at I = 768), so 64 registers a thread at most.
__global__ void __launch_bounds__(kWarps* kWarpSize, 8) moe_down_staged_kernel(const MoeExpertsParams p) {
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ bool last_s;            // this block does the row tile's fused combine
  const int num_work = *p.num_work;  // moe_align's, written before gate_up (pdl.cuh)
  if (static_cast<int>(blockIdx.y) >= num_work) {
    pdl_wait_then_trigger();  // every block waits before it exits
    // No expert here has work: the combine's sums are all zero, written by the first work row's blocks.
    if (p.fuse_combine && num_work == 0 && blockIdx.y == 0) combine_tile(p);
    return;
  }
  const WorkItem w = work_item(p);
  if (w.count <= kMmaCols)
    down_tile_staged<1>(p, w, smem);
  else
    down_tile_staged<2>(p, w, smem);
  if (p.fuse_combine && last_to_arrive(p, num_work, last_s)) combine_tile(p);
}

// Dynamic shared memory of a staged down block, or 0 where the down kernel is not staged (not asked, I not
// whole k blocks, or beyond the limit).
size_t staged_down_bytes(const MoeExpertsParams& p) {
  if (!p.stage_down || p.inter % kMmaK != 0) return 0;
  const size_t bytes = std::max(staged_tile_bytes(p.inter), kWarps * kNt * 4 * kWarpSize * sizeof(float));
  return bytes <= p.staged_smem ? bytes : 0;
}

}  // namespace

void launch_moe_experts(const MoeExpertsParams& p, cudaStream_t stream, const LaunchPolicy& policy) {
  const dim3 block(kWarps * kWarpSize);
  const dim3 gate_up_grid((p.inter + 7) / 8, p.max_work);
  launch(policy, Site::kMoeExperts, Pdl::kEnrolled, moe_gate_up_kernel, gate_up_grid, block, 0, stream, p);
  const dim3 down_grid((p.hidden + kMmaRows - 1) / kMmaRows, p.max_work);
  const size_t down_smem = staged_down_bytes(p);
  const bool combine = p.combine.out != nullptr;
  TPS_CHECK(!combine || (p.y_f32 != nullptr && p.combine.y_f32 == p.y_f32 && p.combine.origin == nullptr),
            "moe_experts: the combine reads the experts' f32 rows in slot order");
  MoeExpertsParams down = p;
  down.fuse_combine = combine && p.fuse_combine && down_smem > 0 && p.combine_counters != nullptr &&
                      int64_t(p.combine.tokens) * p.combine.k <= kMoeFusedCombineMaxAssignments &&
                      static_cast<int>(down_grid.x) <= p.combine_counter_capacity;
  launch(policy, Site::kMoeExperts, Pdl::kEnrolled, down_smem > 0 ? moe_down_staged_kernel : moe_down_kernel,
         down_grid, block, down_smem, stream, down);
  if (combine && !down.fuse_combine) launch_moe_combine(p.combine, stream, policy);
}

}  // namespace tpserve::kernels
