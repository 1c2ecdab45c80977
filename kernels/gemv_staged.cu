// The staged GEMV (kernels/gemv.h, GemvLaunchOptions): one block an SM (up to staged_blocks_per_sm smaller
// ones), each owning T row tiles of 16 weight rows whole in shared memory. Warp w works on tile w / S and the
// k range w % S of it (S k splits). It first issues asynchronous 16-byte copies (cp.async, no registers held)
// of exactly the weight pieces it will read, in GemvLaunchOptions::staged_copy_groups groups (parts of its k
// range, 1 by default), and only then waits for the predecessor grid: under PDL the block becomes resident
// while the predecessor still runs, so the weight read overlaps it whole. The activations are copied to
// shared memory where they fit beside the weights (else each warp reads its token rows from global memory,
// L2, as it goes: QKV 2048->5120 from 6 rows), the warp's tensor-core tiles read the weights from there (rows
// padded by 64 bytes), and the S partial tiles of a tile are summed in a fixed order through shared memory
// that the weight rows no longer need.
#include <algorithm>
#include <type_traits>

#include "kernels/attention_partials.cuh"
#include "kernels/gemv.h"
#include "kernels/gemv_parts.cuh"
#include "kernels/launch.h"
#include "kernels/mma_tile.cuh"
#include "kernels/phase_trace.cuh"
#include "kernels/staged_tile.cuh"

namespace tpserve::kernels {
TPS_PHASE_TRACE_DEFINE(g_gemv_marks, TracedKernel::kGemvStaged)
TPS_PHASE_TRACE_DEFINE(g_gemv_early_marks, TracedKernel::kGemvStagedTriggerEarly)
// A launch that triggers before its wait (the QKV projection) marks into its own buffer, so that the O
// projection after it does not overwrite its marks (kernels/phase_trace.h).
// MARK: TPS_PHASE_MARK or TPS_PHASE_MARK_AFTER_BLOCK.
#define TPS_GEMV_MARK(MARK, i)     \
  do {                             \
    if (trigger_before_wait)       \
      MARK(g_gemv_early_marks, i); \
    else                           \
      MARK(g_gemv_marks, i);       \
  } while (0)
namespace {

constexpr int kMaxStagedWarps = 32;
constexpr int kMinKBlocksPerWarp = 4;  // below this, more warps add partial tiles to sum but no bandwidth
// Shared memory an SM reserves for each resident block (SM80+).
constexpr size_t kSmemReservedPerBlock = SmLimits{}.reserved_smem_per_block;

// Shared memory: the weight rows [T * 16][row_elems] (reused for the partial tiles once read), then, with
// kXShared, the activations [M][row_elems] at x_offset bytes; without, the activations are read from global
// memory (L2) by the product, 4 loads in flight a thread (4 / NT k blocks of NT token tiles: no spills).
template <int NT, typename Out, bool kXShared>
__global__ void __launch_bounds__(kMaxStagedWarps* kWarpSize)
    gemv_staged_kernel(const GemvParams p, int tiles_per_block, int k_splits, int x_offset, int copy_groups,
                       bool weights_evict_first, int groups_in_flight, bool trigger_before_wait) {
  TPS_GEMV_MARK(TPS_PHASE_MARK, 0);
  extern __shared__ __align__(16) unsigned char smem[];
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int g = lane / 4, q = lane % 4;
  const int row_elems = p.k + kStagedRowPad;
  const int tile = warp / k_splits, split = warp % k_splits;
  const int tile_row0 = (blockIdx.x * tiles_per_block + tile) * kMmaRows;
  bf16* w_tile = reinterpret_cast<bf16*>(smem) + tile * kMmaRows * row_elems;
  bf16* x_s = reinterpret_cast<bf16*>(smem + x_offset);
  int kb_begin, kb_end;
  split_range(p.k / kMmaK, k_splits, split, kb_begin, kb_end);
  // The warp's k range in copy_groups commit groups: group i's product starts once its copies landed,
  // while the later groups still stream in.
  auto group_range = [&](int i, int& b0, int& b1) {
    split_range(kb_end - kb_begin, copy_groups, i, b0, b1);
    b0 += kb_begin, b1 += kb_begin;
  };
  // Rows past N are zero-filled: their products are never stored.
  auto row_ptr = [&](int r) {
    return tile_row0 + r < p.n ? p.w + static_cast<int64_t>(tile_row0 + r) * p.k : nullptr;
  };
  const StreamHint w_hint = stream_hint(weights_evict_first);
  for (int i = 0; i < copy_groups; ++i) {
    // Throttled (groups_in_flight > 0): group i goes out once group i - groups_in_flight has landed, so that
    // the stream keeps fewer bytes queued ahead of the kernel before it (GemvLaunchOptions).
    if (groups_in_flight > 0 && i >= groups_in_flight) cp_async_wait_pending(groups_in_flight - 1);
    int b0, b1;
    group_range(i, b0, b1);
    copy_rows_async(w_tile, row_elems, row_ptr, p.w, b0, b1, w_hint);
  }
  if (trigger_before_wait) pdl_trigger();  // GemvLaunchOptions::staged_trigger_before_wait
  // GemvParams::x_partials: merged here or read from x, decided by the token's position, which attention
  // (the launch before) does not write.
  DeferredPartials merge;
  if (kXShared && p.x_partials.out != nullptr) merge = attention_partials_to_merge(p.x_partials);
  TPS_GEMV_MARK(TPS_PHASE_MARK, 1);

  pdl_wait();  // the activations are predecessors' outputs
  if (!trigger_before_wait) pdl_trigger();
  TPS_GEMV_MARK(TPS_PHASE_MARK, 2);
  const bf16* b[NT];  // token columns; tokens past the last read as zero
  if constexpr (kXShared) {
    const int vecs = p.k / kBf16PerVec;
    if (merge.count > 0) {
      merge_attention_partials(p.x_partials, merge, x_s);  // one row (M = 1)
    } else {
      for (int i = threadIdx.x; i < p.m * vecs; i += blockDim.x)
        store_vec(x_s + (i / vecs) * row_elems + (i % vecs) * kBf16PerVec,
                  load_vec(p.x + static_cast<int64_t>(i / vecs) * p.k + (i % vecs) * kBf16PerVec));
    }
    __syncthreads();
    shared_token_columns<NT>(x_s, row_elems, p.m, b);
  } else {
    global_token_columns<NT>(p.x, p.k, p.m, b);
  }
  TPS_GEMV_MARK(TPS_PHASE_MARK, 3);
  float acc[NT][4] = {};
  for (int i = 0; i < copy_groups; ++i) {
    cp_async_wait_pending(copy_groups - 1 - i);  // this thread's group i; __syncwarp: the warp's, visible
    __syncwarp();
    int b0, b1;
    group_range(i, b0, b1);
    mma_staged<NT, kXShared ? 1 : 4 / NT>(acc, w_tile, row_elems, b, b0, b1);
  }

  __syncthreads();  // every warp is done with the weight rows: their space takes the partial tiles
  TPS_GEMV_MARK(TPS_PHASE_MARK, 4);
  reduce_warp_tiles<NT>(acc, reinterpret_cast<float*>(smem), k_splits);
  if (split == 0) store_tile<NT, Out>(p, acc, tile_row0 + g, tile_row0 + g + 8, q);
  TPS_GEMV_MARK(TPS_PHASE_MARK_AFTER_BLOCK, 5);
}
#undef TPS_GEMV_MARK

// T = the row tiles a block holds so that the SMs take the grid in one wave of up to blocks_per_sm blocks
// each; S = k splits, so that each warp has >= 4 k blocks and the block at most 32 / (blocks an SM holds)
// and GemvLaunchOptions::staged_max_warps warps. The activations go to shared memory where they fit beside
// the weights, else (with GemvLaunchOptions::staged_x_global) the product reads them from global memory.
// False where K is not whole k blocks or the blocks an SM holds exceed its shared memory.
bool staged_shape(const GemvParams& p, const GemvLaunchOptions& o, int token_tiles, int blocks_per_sm,
                  GemvStagedPlan& s) {
  s = GemvStagedPlan{};  // a plan tried before (more blocks an SM) leaves nothing behind
  if (p.k % kMmaK != 0 || p.m < 1 || p.m > kGemvMaxTokens || p.n < 1 || o.staged_sms < 1) return false;
  const int tiles = (p.n + kMmaRows - 1) / kMmaRows, k_blocks = p.k / kMmaK;
  s.tiles_per_block = (tiles + o.staged_sms * blocks_per_sm - 1) / (o.staged_sms * blocks_per_sm);
  s.blocks = (tiles + s.tiles_per_block - 1) / s.tiles_per_block;
  // Blocks an SM holds in the wave; their warps share its 64 warps' worth of registers at 64 a thread
  // (the kernel's launch bounds), so each block takes at most 32 / resident warps.
  const int resident = (s.blocks + o.staged_sms - 1) / o.staged_sms;
  const int max_warps =
      std::min(kMaxStagedWarps / resident, std::clamp(o.staged_max_warps, 1, kMaxStagedWarps));
  if (s.tiles_per_block > max_warps) return false;
  s.k_splits = std::max(1, std::min({k_blocks, max_warps / s.tiles_per_block,
                                     (k_blocks + kMinKBlocksPerWarp - 1) / kMinKBlocksPerWarp}));
  const size_t weights = s.tiles_per_block * staged_tile_bytes(p.k);
  const size_t partials =
      warp_tiles_scratch_floats(s.tiles_per_block * s.k_splits, token_tiles) * sizeof(float);
  s.x_offset = std::max(weights, partials);
  s.smem = s.x_offset + p.m * (staged_tile_bytes(p.k) / kMmaRows);  // activation rows, padded alike
  // What each of `resident` blocks may take: the SM's shared memory (the opt-in limit of one block plus the
  // 1 KB the SM reserves a block) shared out, less each block's reserve (staged_smem itself for one block).
  const size_t limit = (o.staged_smem + kSmemReservedPerBlock) / resident - kSmemReservedPerBlock;
  if (s.smem <= limit) return true;
  s.x_shared = false;
  s.smem = s.x_offset;
  return o.staged_x_global && s.smem <= limit;
}

template <int NT>
void launch_staged(const GemvParams& p, const GemvStagedPlan& s, const GemvLaunchOptions& o,
                   cudaStream_t stream, const LaunchPolicy& policy) {
  const dim3 grid(s.blocks), block(s.warps() * kWarpSize);
  const int x_offset = static_cast<int>(s.x_offset);
  const int copy_groups = std::clamp(o.staged_copy_groups, 1, 4);
  const int in_flight = o.staged_groups_in_flight >= copy_groups ? 0 : std::max(o.staged_groups_in_flight, 0);
  auto kernel =
      p.out_f32 != nullptr
          ? (s.x_shared ? gemv_staged_kernel<NT, float, true> : gemv_staged_kernel<NT, float, false>)
          : (s.x_shared ? gemv_staged_kernel<NT, bf16, true> : gemv_staged_kernel<NT, bf16, false>);
  launch(policy, Site::kGemv, Pdl::kEnrolled, kernel, grid, block, s.smem, stream, p, s.tiles_per_block,
         s.k_splits, x_offset, copy_groups, o.staged_weights_evict_first, in_flight,
         o.staged_trigger_before_wait);
}

int token_tiles(const GemvParams& p) {
  return p.m <= kMmaCols ? 1 : 2;
}

// The kernel merges GemvParams::x_partials only with one row in shared memory.
bool plan_merges_attention_partials(const GemvParams& p, const GemvStagedPlan& s) {
  return p.m == 1 && s.x_shared;
}

}  // namespace

bool plan_gemv_staged(const GemvParams& p, const GemvLaunchOptions& options, GemvStagedPlan& plan) {
  const int blocks_per_sm = std::clamp(options.staged_blocks_per_sm, 1, 4);
  return (blocks_per_sm > 1 && staged_shape(p, options, token_tiles(p), blocks_per_sm, plan)) ||
         staged_shape(p, options, token_tiles(p), 1, plan);
}

bool gemv_merges_attention_partials(const GemvParams& p, const GemvLaunchOptions& options) {
  GemvStagedPlan s;
  return plan_gemv_staged(p, options, s) && plan_merges_attention_partials(p, s);
}

bool launch_gemv_staged(const GemvParams& p, const GemvLaunchOptions& options, cudaStream_t stream,
                        const LaunchPolicy& policy) {
  GemvStagedPlan s;
  if (!plan_gemv_staged(p, options, s)) return false;
  if (p.x_partials.out != nullptr && !plan_merges_attention_partials(p, s))
    return false;  // launch_gemv refuses
  if (token_tiles(p) == 1)
    launch_staged<1>(p, s, options, stream, policy);
  else
    launch_staged<2>(p, s, options, stream, policy);
  return true;
}

}  // namespace tpserve::kernels
