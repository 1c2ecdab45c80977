// Fused MoE expert kernels on tensor cores (kernels/mma_tile.cuh). Grid: (row tile of 16 weight rows, work
// item); blocks past the step's number of work items exit at once, so the grid can be sized for the worst
// case. Each block's warps split K and the block sums their tiles in a fixed order.
//   gate_up: a block owns 8 intermediate rows; its tile's rows are gate rows i..i+7 (A rows 0-7) and up
//            rows i..i+7 (A rows 8-15), so each thread ends with gate and up of the same (row, column) and
//            applies silu(gate) * up in registers.
//   down:    a block owns 16 output rows of the expert's down projection.
// Staged (MoeExpertsParams::stage_down / stage_gate_up): the block's 16 weight rows go to shared memory by
// cp.async, all at once (kernels/staged_tile.cuh); the down kernel issues them before its PDL wait, so under
// PDL the down weights stream in during gate_up's tail without holding registers.
#include <algorithm>
#include <type_traits>

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

constexpr size_t kScratchBytes = kWarps * kNt * 4 * kWarpSize * sizeof(float);

// The block's 16 x (8 NT) product tile, summed over its warps into warp 0's acc: A rows row_ptr(0 .. 15)
// (nullptr = a zero row; any_row: some valid address), K = k split over the warps, B columns b[nt].
// kStaged: each warp copies its k range of the 16 rows into `tile` (shared, staged_tile_bytes(k)) with
// cp.async, whose space then takes the partial tiles; else A goes through registers and the partials through
// `scratch` (kScratchBytes). kWaitInside: pdl_wait() right after the first weights are requested (B is read
// after it either way).
template <int NT, bool kStaged, bool kWaitInside, typename RowPtr>
__device__ __forceinline__ void block_tile(float (&acc)[NT][4], const RowPtr& row_ptr, const bf16* any_row,
                                           const bf16* const (&b)[NT], int k, float* scratch, bf16* tile) {
  const int warp = threadIdx.x / kWarpSize, g = (threadIdx.x % kWarpSize) / 4;
  int kb_begin, kb_end;
  split_range((k + kMmaK - 1) / kMmaK, kWarps, warp, kb_begin, kb_end);
  if constexpr (kStaged) {
    const int row_elems = k + kStagedRowPad;
    copy_rows_async(tile, row_elems, row_ptr, any_row, kb_begin, kb_end);
    if constexpr (kWaitInside) pdl_wait_then_trigger();
    cp_async_wait_all();
    __syncwarp();  // the warp's copies, visible to all its lanes
    mma_staged<NT, kUnroll>(acc, tile, row_elems, b, kb_begin, kb_end);
    __syncthreads();  // every warp is done with the rows: their space takes the partial tiles
  } else {
    warp_tile_mma<NT, kUnroll, kWaitInside>(acc, row_ptr(g), row_ptr(g + 8), b, k, kb_begin, kb_end);
  }
  reduce_warp_tiles<NT>(acc, scratch, kWarps);
}

template <int NT, bool kStaged>
__device__ void gate_up_tile(const MoeExpertsParams& p, const WorkItem& w, float* scratch) {
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize, g = lane / 4, q = lane % 4;
  const int row = blockIdx.x * 8 + g;  // intermediate row of this thread's A rows
  const int64_t expert_base = static_cast<int64_t>(w.expert) * 2 * p.inter;
  // Tile rows 0-7: gate rows of intermediate rows blockIdx.x * 8 + r; rows 8-15: the up rows of the same.
  auto row_ptr = [&](int r) -> const bf16* {
    const int i = blockIdx.x * 8 + r % 8;
    return i < p.inter ? p.gate_up + (expert_base + (r < 8 ? 0 : p.inter) + i) * p.hidden : nullptr;
  };
  const bf16* b[NT];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    const int a = assignment(p, w, nt * kMmaCols + g);
    b[nt] = a >= 0 ? p.x + static_cast<int64_t>(a / p.x_row_divisor) * p.hidden : nullptr;
  }
  float acc[NT][4] = {};
  block_tile<NT, kStaged, false>(acc, row_ptr, p.gate_up, b, p.hidden, scratch,
                                 reinterpret_cast<bf16*>(scratch));
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

// kWaitInside: pdl_wait() after the first weight loads (inside block_tile), not before this call.
template <int NT, bool kStaged, bool kWaitInside>
__device__ void down_tile(const MoeExpertsParams& p, const WorkItem& w, float* scratch) {
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize, g = lane / 4, q = lane % 4;
  const int row_lo = blockIdx.x * kMmaRows + g, row_hi = row_lo + 8;
  const int64_t expert_base = static_cast<int64_t>(w.expert) * p.hidden;
  auto row_ptr = [&](int r) -> const bf16* {
    const int row = blockIdx.x * kMmaRows + r;
    return row < p.hidden ? p.down + (expert_base + row) * p.inter : nullptr;
  };
  const bf16* b[NT];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    const int a = assignment(p, w, nt * kMmaCols + g);
    b[nt] = a >= 0 ? p.act + static_cast<int64_t>(a) * p.inter : nullptr;
  }
  float acc[NT][4] = {};
  block_tile<NT, kStaged, kWaitInside>(acc, row_ptr, p.down, b, p.inter, scratch,
                                       reinterpret_cast<bf16*>(scratch));
  if (warp != 0) return;
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

// The block's scratch: static for the register path, the dynamic staged tile otherwise.
template <bool kStaged>
__device__ __forceinline__ float* block_scratch() {
  if constexpr (kStaged) {
    extern __shared__ __align__(16) unsigned char staged_smem[];
    return reinterpret_cast<float*>(staged_smem);
  } else {
    __shared__ float scratch[kScratchBytes / sizeof(float)];
    return scratch;
  }
}

template <bool kStaged>
__global__ void __launch_bounds__(kWarps* kWarpSize) moe_gate_up_kernel(const MoeExpertsParams p) {
  float* scratch = block_scratch<kStaged>();
  pdl_wait_then_trigger();
  if (static_cast<int>(blockIdx.y) >= *p.num_work) return;
  const WorkItem w = work_item(p);
  if (w.count <= kMmaCols)
    gate_up_tile<1, kStaged>(p, w, scratch);
  else
    gate_up_tile<2, kStaged>(p, w, scratch);
}

// Staged: the weight copies always go out before the wait (down_loads_before_wait is for the register path).
template <bool kStaged>
__device__ __forceinline__ void down_block(const MoeExpertsParams& p) {
  float* scratch = block_scratch<kStaged>();
  const bool early = kStaged || p.down_loads_before_wait;
  if (!early) pdl_wait_then_trigger();
  if (static_cast<int>(blockIdx.y) >= *p.num_work) {
    if (early) pdl_wait_then_trigger();  // every block waits before it exits
    return;
  }
  const WorkItem w = work_item(p);
  auto run = [&](auto wait_inside) {
    if (w.count <= kMmaCols)
      down_tile<1, kStaged, decltype(wait_inside)::value>(p, w, scratch);
    else
      down_tile<2, kStaged, decltype(wait_inside)::value>(p, w, scratch);
  };
  if constexpr (kStaged)
    run(std::true_type{});
  else if (p.down_loads_before_wait)
    run(std::true_type{});
  else
    run(std::false_type{});
}

__global__ void __launch_bounds__(kWarps* kWarpSize) moe_down_kernel(const MoeExpertsParams p) {
  down_block<false>(p);
}

// 8 blocks an SM (their 25.6 KB tiles at I = 768), so 64 registers a thread at most.
__global__ void __launch_bounds__(kWarps* kWarpSize, 8) moe_down_staged_kernel(const MoeExpertsParams p) {
  down_block<true>(p);
}

// Dynamic shared memory of a staged block for a K-long product, or 0 where it is not staged (not asked, K
// not whole k blocks, or beyond the limit).
size_t staged_bytes(bool asked, int k, size_t limit) {
  if (!asked || k % kMmaK != 0) return 0;
  const size_t bytes = std::max(staged_tile_bytes(k), kScratchBytes);
  return bytes <= limit ? bytes : 0;
}

}  // namespace

void launch_moe_experts(const MoeExpertsParams& p, cudaStream_t stream, const LaunchPolicy& policy) {
  const dim3 block(kWarps * kWarpSize);
  const dim3 gate_up_grid((p.inter + 7) / 8, p.max_work);
  const size_t gate_up_smem = staged_bytes(p.stage_gate_up, p.hidden, p.staged_smem);
  launch(policy, Site::kMoeExperts, Pdl::kEnrolled,
         gate_up_smem > 0 ? moe_gate_up_kernel<true> : moe_gate_up_kernel<false>, gate_up_grid, block,
         gate_up_smem, stream, p);
  const dim3 down_grid((p.hidden + kMmaRows - 1) / kMmaRows, p.max_work);
  const size_t down_smem = staged_bytes(p.stage_down, p.inter, p.staged_smem);
  launch(policy, Site::kMoeExperts, Pdl::kEnrolled, down_smem > 0 ? moe_down_staged_kernel : moe_down_kernel,
         down_grid, block, down_smem, stream, p);
}

}  // namespace tpserve::kernels
