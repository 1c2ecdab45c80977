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
#include "kernels/bulk_copy.cuh"
#include "kernels/launch.h"
#include "kernels/mma_tile.cuh"
#include "kernels/moe_align.h"
#include "kernels/moe_experts.h"
#include "kernels/phase_trace.cuh"
#include "kernels/staged_tile.cuh"

namespace tpserve::kernels {
TPS_PHASE_TRACE_DEFINE(g_gate_up_marks, TracedKernel::kMoeGateUpBulk)
TPS_PHASE_TRACE_DEFINE(g_down_marks, TracedKernel::kMoeDownStaged)
namespace {

constexpr int kWarps = 4;
constexpr int kUnroll = 4;
constexpr int kNt = kMoeTileTokens / kMmaCols;  // n-tiles per work item
static_assert(kNt == 2);
constexpr size_t kScratchFloats = warp_tiles_scratch_floats(kWarps, kNt);  // the warps' partial tiles

struct WorkItem {
  int expert, first, count;
};

// This block's work item (blockIdx.y); count 0: none here - past the step's work items (moe_align's count,
// or one per assignment with MoeExpertsParams::slot_experts), or an assignment of an expert held elsewhere.
__device__ __forceinline__ WorkItem block_work_item(const MoeExpertsParams& p) {
  const int y = blockIdx.y;
  if (p.slot_experts != nullptr) {
    const int e = y < p.max_work ? p.slot_experts[y] - p.expert_begin : -1;
    const bool here = e >= 0 && e < p.local_experts;
    return {here ? e : 0, y, here ? 1 : 0};
  }
  if (y >= *p.num_work) return {0, 0, 0};
  const int32_t* w = p.work + 3 * y;
  return {w[0], w[1], w[2]};
}

// Assignment in column `col` of the work item, or -1.
__device__ __forceinline__ int assignment(const MoeExpertsParams& p, const WorkItem& w, int col) {
  return col < w.count ? p.sorted[w.first + col] : -1;
}

// b[nt]: for the work item's assignment a in column nt * 8 + g, row a / divisor of `rows` ([*][stride]), or
// nullptr: the B operand of gate_up (x rows, divisor MoeExpertsParams::x_row_divisor) and of down (act rows).
template <int NT>
__device__ __forceinline__ void assignment_rows(const MoeExpertsParams& p, const WorkItem& w, int g,
                                                const bf16* rows, int divisor, int stride,
                                                const bf16* (&b)[NT]) {
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    const int a = assignment(p, w, nt * kMmaCols + g);
    b[nt] = a >= 0 ? rows + static_cast<int64_t>(a / divisor) * stride : nullptr;
  }
}

// Warp 0's summed gate_up tile: act[a][row] = silu(gate) * up for the work item's assignments a.
template <int NT>
__device__ __forceinline__ void store_gate_up_tile(const MoeExpertsParams& p, const WorkItem& w,
                                                   const float (&acc)[NT][4], int row, int q) {
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

template <int NT>
__device__ void gate_up_tile(const MoeExpertsParams& p, const WorkItem& w, float* scratch) {
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize, g = lane / 4, q = lane % 4;
  const int row = blockIdx.x * 8 + g;  // intermediate row of this thread's A rows
  const int64_t expert_base = static_cast<int64_t>(w.expert) * 2 * p.inter;
  const bf16* a_lo = row < p.inter ? p.gate_up + (expert_base + row) * p.hidden : nullptr;
  const bf16* a_hi = row < p.inter ? p.gate_up + (expert_base + p.inter + row) * p.hidden : nullptr;
  const bf16* b[NT];
  assignment_rows<NT>(p, w, g, p.x, p.x_row_divisor, p.hidden, b);
  int kb_begin, kb_end;
  split_range((p.hidden + kMmaK - 1) / kMmaK, kWarps, warp, kb_begin, kb_end);
  float acc[NT][4] = {};
  warp_tile_mma<NT, kUnroll, false>(acc, a_lo, a_hi, b, p.hidden, kb_begin, kb_end);
  reduce_warp_tiles<NT>(acc, scratch, kWarps);
  if (warp == 0 && row < p.inter) store_gate_up_tile<NT>(p, w, acc, row, q);
}

// Gate_up streamed through shared memory (MoeExpertsParams::gate_up_bulk, H a multiple of gate_up_bulk_cols):
// the block's 16 rows, C = gate_up_bulk_cols columns a stage (256 or 512), each row's piece of a stage one
// bulk copy (kernels/bulk_copy.cuh) issued by a lane of warp 0 each, p.gate_up_bulk_stages stages in flight;
// warp w multiplies columns [C / 4 w, C / 4 (w + 1)) of every stage (its activations from global memory), in
// chunks of 64 columns (a fixed k range, so that the product's bounds checks fold away), then the warps'
// tiles are summed as above.
constexpr int kBulkColsMin = 256, kBulkColsMax = 512;
constexpr int kBulkChunkCols = kBulkColsMin / kWarps;
__host__ __device__ constexpr int bulk_row_elems(int cols) {
  return cols + kStagedRowPad;
}
__host__ __device__ constexpr size_t bulk_slot_bytes(int cols) {
  return size_t(kMmaRows) * bulk_row_elems(cols) * sizeof(bf16);
}
static_assert(2 * bulk_slot_bytes(kBulkColsMin) >= kScratchFloats * sizeof(float) &&
              kBulkChunkCols % kMmaK == 0 && kBulkColsMax / kWarps % kBulkChunkCols == 0);

template <int NT>
__device__ void gate_up_tile_bulk(const MoeExpertsParams& p, const WorkItem& w, unsigned char* smem,
                                  uint64_t* bars) {
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize, g = lane / 4, q = lane % 4;
  const int row = blockIdx.x * 8 + g;  // intermediate row of this thread's A rows
  const int64_t expert_base = static_cast<int64_t>(w.expert) * 2 * p.inter;
  const int cols = p.gate_up_bulk_cols, row_elems = bulk_row_elems(cols), warp_cols = cols / kWarps;
  const int stages = p.hidden / cols, rows_here = min(8, p.inter - static_cast<int>(blockIdx.x) * 8);
  const int slots = p.gate_up_bulk_stages;
  // Stage s holds column piece (s + first) % stages: with gate_up_bulk_rotate, blocks side by side start at
  // different pieces, so that the blocks' concurrent copies spread over the rows' whole width.
  const int first = p.gate_up_bulk_rotate ? static_cast<int>(blockIdx.x) % stages : 0;
  auto piece = [&](int s) { return s + first < stages ? s + first : s + first - stages; };
  const size_t slot_bytes = bulk_slot_bytes(cols);
  auto slot = [&](int s) { return reinterpret_cast<bf16*>(smem + (s % slots) * slot_bytes); };
  const StreamHint w_hint = stream_hint(p.weights_evict_first);
  auto issue =
      [&](int s) {  // warp 0: lane 0 arms the stage's barrier, lane r copies tile row r (0-7 gate, 8-15 up)
        uint64_t* bar = &bars[s % slots];
        if (lane == 0)
          mbarrier_arrive_expect(bar, static_cast<uint32_t>(2 * rows_here * cols * sizeof(bf16)));
        __syncwarp();
        if (lane < kMmaRows && lane % 8 < rows_here) {  // rows past I: never stored
          const int64_t src_row = expert_base + (lane < 8 ? 0 : p.inter) + blockIdx.x * 8 + lane % 8;
          bulk_copy_to_shared(slot(s) + lane * row_elems, p.gate_up + src_row * p.hidden + piece(s) * cols,
                              cols * sizeof(bf16), bar, w_hint);
        }
      };
  if (warp == 0)
    for (int s = 0; s < min(slots, stages); ++s) issue(s);
  TPS_PHASE_MARK(g_gate_up_marks, 4);
  const bf16* b[NT];
  assignment_rows<NT>(p, w, g, p.x, p.x_row_divisor, p.hidden, b);
  float acc[NT][4] = {};
  for (int s = 0; s < stages; ++s) {
    mbarrier_wait(&bars[s % slots], (s / slots) & 1);
    if (s == 0) TPS_PHASE_MARK(g_gate_up_marks, 5);
    const int col0 = piece(s) * cols + warp * warp_cols;
    for (int c = 0; c < warp_cols; c += kBulkChunkCols) {
      const bf16* bs[NT];
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) bs[nt] = b[nt] != nullptr ? b[nt] + col0 + c : nullptr;
      mma_staged<NT, kBulkChunkCols / kMmaK>(acc, slot(s) + warp * warp_cols + c, row_elems, bs, 0,
                                             kBulkChunkCols / kMmaK);
    }
    __syncthreads();  // every warp is done with the slot: the next stage may land in it
    if (warp == 0 && s + slots < stages) issue(s + slots);
  }
  TPS_PHASE_MARK(g_gate_up_marks, 6);
  reduce_warp_tiles<NT>(acc, reinterpret_cast<float*>(smem), kWarps);  // the slots are free now
  if (warp == 0 && row < p.inter) store_gate_up_tile<NT>(p, w, acc, row, q);
  TPS_PHASE_MARK_AFTER_BLOCK(g_gate_up_marks, 7);
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
  assignment_rows<NT>(p, w, g, p.act, 1, p.inter, b);
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
  assignment_rows<NT>(p, w, g, p.act, 1, p.inter, b);
  int kb_begin, kb_end;
  split_range(p.inter / kMmaK, kWarps, warp, kb_begin, kb_end);
  bf16* tile = reinterpret_cast<bf16*>(smem);
  const int row_elems = p.inter + kStagedRowPad;
  auto row_ptr = [&](int r) -> const bf16* {  // rows past H: zero-filled, their products never stored
    return row0 + r < p.hidden ? p.down + (expert_base + row0 + r) * p.inter : nullptr;
  };
  copy_rows_async(tile, row_elems, row_ptr, p.down, kb_begin, kb_end, stream_hint(p.weights_evict_first));
  TPS_PHASE_MARK(g_down_marks, 1);
  pdl_wait_then_trigger();  // the activations are gate_up's output
  TPS_PHASE_MARK(g_down_marks, 2);
  auto landed = [] {
    cp_async_wait_all();
    __syncwarp();  // the warp's copies, visible to all its lanes
    TPS_PHASE_MARK(g_down_marks, 3);
  };
  float acc[NT][4] = {};
  const bool act_first = NT == 1 && p.down_act_before_weights && kb_end - kb_begin <= kMoeDownActPiecesMax;
  if (act_first) {
    if constexpr (NT == 1)
      mma_staged_b_first<kMoeDownActPiecesMax>(acc, tile, row_elems, b[0], kb_begin, kb_end, landed);
  } else {
    landed();
    mma_staged<NT, kUnroll>(acc, tile, row_elems, b, kb_begin, kb_end);
  }
  __syncthreads();  // every warp is done with the rows: their space takes the partial tiles
  TPS_PHASE_MARK(g_down_marks, 4);
  reduce_warp_tiles<NT>(acc, reinterpret_cast<float*>(smem), kWarps);
  if (warp == 0) store_down_tile<NT>(p, w, acc, row0 + g, row0 + g + 8, q);
  TPS_PHASE_MARK_AFTER_BLOCK(g_down_marks, 5);
}

__global__ void __launch_bounds__(kWarps* kWarpSize) moe_gate_up_kernel(const MoeExpertsParams p) {
  __shared__ float scratch[kScratchFloats];
  pdl_wait_then_trigger();
  const WorkItem w = block_work_item(p);
  if (w.count == 0) return;  // past the step's work items, or an expert held elsewhere
  if (w.count <= kMmaCols)
    gate_up_tile<1>(p, w, scratch);
  else
    gate_up_tile<2>(p, w, scratch);
}

// 8 blocks an SM (64 registers a thread at most): measured faster than fewer blocks with more stages each,
// and than 10 blocks with registers spilled (docs/PERF.md, sixteenth session).
__global__ void __launch_bounds__(kWarps* kWarpSize, 8) moe_gate_up_bulk_kernel(const MoeExpertsParams p) {
  TPS_PHASE_MARK(g_gate_up_marks, 0);
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ uint64_t bars[kMoeGateUpBulkMaxStages];
  if (threadIdx.x == 0)
    for (int i = 0; i < p.gate_up_bulk_stages; ++i) mbarrier_init(&bars[i]);
  __syncthreads();
  TPS_PHASE_MARK(g_gate_up_marks, 1);
  pdl_wait_then_trigger();  // the routing and the activations are predecessors' outputs
  TPS_PHASE_MARK(g_gate_up_marks, 2);
  const WorkItem w = block_work_item(p);
  TPS_PHASE_MARK(g_gate_up_marks, 3);
  if (w.count == 0) return;  // past the step's work items, or an expert held elsewhere
  if (w.count <= kMmaCols)
    gate_up_tile_bulk<1>(p, w, smem, bars);
  else
    gate_up_tile_bulk<2>(p, w, smem, bars);
}

__global__ void __launch_bounds__(kWarps* kWarpSize) moe_down_kernel(const MoeExpertsParams p) {
  __shared__ float scratch[kScratchFloats];
  if (!p.down_loads_before_wait) pdl_wait_then_trigger();
  const WorkItem w = block_work_item(p);
  if (w.count == 0) {  // past the step's work items, or an expert held elsewhere
    if (p.down_loads_before_wait) pdl_wait_then_trigger();  // every block waits before it exits
    return;
  }
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
  TPS_PHASE_MARK(g_down_marks, 0);
  extern __shared__ __align__(16) unsigned char smem[];
  // The routing (moe_align's, or the top-k ids) was written before gate_up passed its wait (pdl.cuh).
  const WorkItem w = block_work_item(p);
  if (w.count == 0) {         // past the step's work items, or an expert held elsewhere
    pdl_wait_then_trigger();  // every block waits before it exits
    TPS_PHASE_MARK(g_down_marks, 2);
    return;
  }
  if (w.count <= kMmaCols)
    down_tile_staged<1>(p, w, smem);
  else
    down_tile_staged<2>(p, w, smem);
}

// Dynamic shared memory of a staged down block, or 0 where the down kernel is not staged (not asked, I not
// whole k blocks, or beyond the limit).
size_t staged_down_bytes(const MoeExpertsParams& p) {
  if (!p.stage_down || p.inter % kMmaK != 0) return 0;
  const size_t bytes = std::max(staged_tile_bytes(p.inter), kScratchFloats * sizeof(float));
  return bytes <= p.staged_smem ? bytes : 0;
}

}  // namespace

void launch_moe_experts(const MoeExpertsParams& p, cudaStream_t stream, const LaunchPolicy& policy) {
  const dim3 block(kWarps * kWarpSize);
  const dim3 gate_up_grid((p.inter + 7) / 8, p.max_work);
  TPS_CHECK(p.gate_up_bulk_cols == kBulkColsMin || p.gate_up_bulk_cols == kBulkColsMax,
            "moe gate_up: ", p.gate_up_bulk_cols, " bulk columns a stage, not ", kBulkColsMin, " or ",
            kBulkColsMax);
  if (p.gate_up_bulk && p.hidden > 0 && p.hidden % kBulkColsMin == 0) {
    TPS_CHECK(p.gate_up_bulk_stages >= 2 && p.gate_up_bulk_stages <= kMoeGateUpBulkMaxStages,
              "moe gate_up: ", p.gate_up_bulk_stages, " bulk stages, not 2..", kMoeGateUpBulkMaxStages);
    MoeExpertsParams bulk = p;
    // The asked stage width where H holds whole stages of it, else the narrower one.
    if (p.hidden % p.gate_up_bulk_cols != 0) bulk.gate_up_bulk_cols = kBulkColsMin;
    launch(policy, Site::kMoeExperts, Pdl::kEnrolled, moe_gate_up_bulk_kernel, gate_up_grid, block,
           p.gate_up_bulk_stages * bulk_slot_bytes(bulk.gate_up_bulk_cols), stream, bulk);
  } else {
    launch(policy, Site::kMoeExperts, Pdl::kEnrolled, moe_gate_up_kernel, gate_up_grid, block, 0, stream, p);
  }
  const dim3 down_grid((p.hidden + kMmaRows - 1) / kMmaRows, p.max_work);
  const size_t down_smem = staged_down_bytes(p);
  launch(policy, Site::kMoeExperts, Pdl::kEnrolled, down_smem > 0 ? moe_down_staged_kernel : moe_down_kernel,
         down_grid, block, down_smem, stream, p);
}

bool moe_gate_up_bulk_available(int device_sm) {
  return runs_sm90_code(reinterpret_cast<const void*>(moe_gate_up_bulk_kernel), device_sm);
}

}  // namespace tpserve::kernels
