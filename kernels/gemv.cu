// GEMV for decode: each block owns 16 weight rows; its warps split K into contiguous ranges, each warp runs
// tensor-core tiles over its range (kernels/mma_tile.cuh) and the block sums the warps' tiles in a fixed
// order. The first weight loads (kUnroll k blocks per warp: with 16 warps, K = 2048 whole, half of K = 4096)
// are issued before pdl_wait(): weights are not written by predecessors. Where the weights fit in shared
// memory the staged kernel (gemv_staged.cu) runs instead.
#include <algorithm>
#include <type_traits>

#include "common/error.h"
#include "kernels/gemv.h"
#include "kernels/gemv_parts.cuh"
#include "kernels/launch.h"
#include "kernels/mma_tile.cuh"

namespace tpserve::kernels {
namespace {

constexpr int kMaxWarps = 16;
constexpr int kUnroll = 4;

template <int NT, typename Out>
__global__ void __launch_bounds__(kMaxWarps* kWarpSize) gemv_kernel(const GemvParams p) {
  __shared__ float scratch[warp_tiles_scratch_floats(kMaxWarps, NT)];
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize, warps = blockDim.x / kWarpSize;
  const int g = lane / 4, q = lane % 4;
  const int row_lo = blockIdx.x * kMmaRows + g, row_hi = row_lo + 8;
  const bf16* a_lo = row_lo < p.n ? p.w + static_cast<int64_t>(row_lo) * p.k : nullptr;
  const bf16* a_hi = row_hi < p.n ? p.w + static_cast<int64_t>(row_hi) * p.k : nullptr;
  const bf16* b[NT];
  global_token_columns<NT>(p.x, p.k, p.m, b);
  int kb_begin, kb_end;
  split_range((p.k + kMmaK - 1) / kMmaK, warps, warp, kb_begin, kb_end);
  float acc[NT][4] = {};
  warp_tile_mma<NT, kUnroll, /*kWaitInside=*/true>(acc, a_lo, a_hi, b, p.k, kb_begin, kb_end);
  reduce_warp_tiles<NT>(acc, scratch, warps);
  if (warp == 0) store_tile<NT, Out>(p, acc, row_lo, row_hi, q);
}

template <int NT>
void launch_tiles(const GemvParams& p, dim3 grid, dim3 block, cudaStream_t stream,
                  const LaunchPolicy& policy) {
  if (p.out_f32 != nullptr)
    launch(policy, Site::kGemv, Pdl::kEnrolled, gemv_kernel<NT, float>, grid, block, 0, stream, p);
  else
    launch(policy, Site::kGemv, Pdl::kEnrolled, gemv_kernel<NT, bf16>, grid, block, 0, stream, p);
}

}  // namespace

bool launch_gemv(const GemvParams& p, cudaStream_t stream, const LaunchPolicy& policy,
                 const GemvLaunchOptions& options) {
  if (p.x_partials.out != nullptr) {
    TPS_CHECK(p.x_partials.max_ranges >= 2 && p.x_partials.max_ranges <= kAttentionPartialsMaxRanges &&
                  p.x_partials.head_dim % 4 == 0 && p.x_partials.heads * p.x_partials.head_dim == p.k,
              "gemv: attention partials of ", p.x_partials.heads, " heads of ", p.x_partials.head_dim,
              " merged up to ", p.x_partials.max_ranges, " ranges for K = ", p.k);
  }
  if (options.staged_sms > 0 && launch_gemv_staged(p, options, stream, policy)) return true;
  TPS_CHECK(
      p.x_partials.out == nullptr,
      "gemv: attention partials need M = 1 and the staged kernel with its activations in shared memory");
  const int row_tiles = (p.n + kMmaRows - 1) / kMmaRows;
  const int k_blocks = (p.k + kMmaK - 1) / kMmaK;
  // Few row tiles (O projection, router): more warps per tile split K finer, so that enough loads are in
  // flight on every SM. Never more warps than k blocks.
  int warps = row_tiles < 512 ? kMaxWarps : 4;
  warps = std::max(1, std::min(warps, k_blocks));
  const dim3 grid(row_tiles), block(warps * kWarpSize);
  if (p.m <= kMmaCols)
    launch_tiles<1>(p, grid, block, stream, policy);
  else
    launch_tiles<2>(p, grid, block, stream, policy);
  return false;
}

}  // namespace tpserve::kernels
