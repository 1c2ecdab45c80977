// GEMV for decode: each block owns 16 weight rows; its warps split K into contiguous ranges, each warp runs
// tensor-core tiles over its range (kernels/mma_tile.cuh) and the block sums the warps' tiles in a fixed
// order. The first weight loads (kUnroll k blocks per warp: with 16 warps, K = 2048 whole, half of K = 4096)
// are issued before pdl_wait(): weights are not written by predecessors. gemv_norm_kernel computes its
// activations (an RMSNorm, gemv.h) while those loads are in flight.
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
  __shared__ float scratch[kMaxWarps * NT * 4 * kWarpSize];
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize, warps = blockDim.x / kWarpSize;
  const int g = lane / 4, q = lane % 4;
  const int row_lo = blockIdx.x * kMmaRows + g, row_hi = row_lo + 8;
  const bf16* a_lo = row_lo < p.n ? p.w + static_cast<int64_t>(row_lo) * p.k : nullptr;
  const bf16* a_hi = row_hi < p.n ? p.w + static_cast<int64_t>(row_hi) * p.k : nullptr;
  const bf16* b[NT];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    const int token = nt * kMmaCols + g;
    b[nt] = token < p.m ? p.x + static_cast<int64_t>(token) * p.k : nullptr;
  }
  int kb_begin, kb_end;
  split_range((p.k + kMmaK - 1) / kMmaK, warps, warp, kb_begin, kb_end);
  float acc[NT][4] = {};
  warp_tile_mma<NT, kUnroll, /*kWaitInside=*/true>(acc, a_lo, a_hi, b, p.k, kb_begin, kb_end);
  reduce_warp_tiles<NT>(acc, scratch);
  if (warp == 0) store_tile<NT, Out>(p, acc, row_lo, row_hi, q);
}

template <int NT, typename Out>
__global__ void __launch_bounds__(kMaxWarps* kWarpSize)
    gemv_norm_kernel(const GemvParams p, const GemvNormParams n) {
  extern __shared__ __align__(16) bf16 x_s[];  // [M][K + kNormRowPad]
  __shared__ float scratch[kMaxWarps * NT * 4 * kWarpSize];
  bool last = false;
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize, warps = blockDim.x / kWarpSize;
  const int g = lane / 4, q = lane % 4;
  const int row_lo = blockIdx.x * kMmaRows + g, row_hi = row_lo + 8;
  const bf16* a_lo = row_lo < p.n ? p.w + static_cast<int64_t>(row_lo) * p.k : nullptr;
  const bf16* a_hi = row_hi < p.n ? p.w + static_cast<int64_t>(row_hi) * p.k : nullptr;
  const bf16* b[NT];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    const int token = nt * kMmaCols + g;
    b[nt] = token < p.m ? x_s + token * (p.k + kNormRowPad) : nullptr;
  }
  int kb_begin, kb_end;
  split_range((p.k + kMmaK - 1) / kMmaK, warps, warp, kb_begin, kb_end);
  float acc[NT][4] = {};
  warp_tile_mma_hooked<NT, kUnroll>(acc, a_lo, a_hi, b, p.k, kb_begin, kb_end, [&] {
    prefetch_norm_weight(n, p.k);
    pdl_wait_then_trigger();  // residual and add are predecessors' outputs
    norm_rows_to_shared(p, n, x_s);
    last = arrive_after_reading_inputs(n);
  });
  reduce_warp_tiles<NT>(acc, scratch);
  if (warp == 0) store_tile<NT, Out>(p, acc, row_lo, row_hi, q);
  write_normed_share(p, n, x_s);
  if (last) write_residual(p, n);
}

template <int NT>
void launch_tiles(const GemvParams& p, dim3 grid, dim3 block, cudaStream_t stream,
                  const LaunchPolicy& policy) {
  if (p.out_f32 != nullptr)
    launch(policy, Site::kGemv, Pdl::kEnrolled, gemv_kernel<NT, float>, grid, block, 0, stream, p);
  else
    launch(policy, Site::kGemv, Pdl::kEnrolled, gemv_kernel<NT, bf16>, grid, block, 0, stream, p);
}

// Grid and block of a GEMV: one block per 16 weight rows. Few row tiles (O projection, router): more warps
// per tile split K finer, so that enough loads are in flight on every SM. Never more warps than k blocks.
void gemv_shape(const GemvParams& p, dim3& grid, dim3& block) {
  const int row_tiles = (p.n + kMmaRows - 1) / kMmaRows;
  const int k_blocks = (p.k + kMmaK - 1) / kMmaK;
  int warps = row_tiles < 512 ? kMaxWarps : 4;
  warps = std::max(1, std::min(warps, k_blocks));
  grid = dim3(row_tiles);
  block = dim3(warps * kWarpSize);
}

size_t norm_smem_bytes(int m, int k) {
  return static_cast<size_t>(m) * (k + kNormRowPad) * sizeof(bf16);
}

}  // namespace

void launch_gemv(const GemvParams& p, cudaStream_t stream, const LaunchPolicy& policy,
                 const GemvLaunchOptions& options) {
  if (options.staged_sms > 0 && launch_gemv_staged(p, nullptr, options, stream, policy)) return;
  dim3 grid, block;
  gemv_shape(p, grid, block);
  if (p.m <= kMmaCols)
    launch_tiles<1>(p, grid, block, stream, policy);
  else
    launch_tiles<2>(p, grid, block, stream, policy);
}

// At most one token tile: 9-16 rows would take 66 KB of shared memory at K = 2048 (plus the tiles' 16 KB),
// two blocks an SM, and a QKV projection's 320 blocks would no longer fit one wave.
bool gemv_norm_fits(int m, int k) {
  constexpr size_t kMaxNormSmem = size_t(96) << 10;
  return m >= 1 && m <= kMmaCols && k > 0 && k % kBf16PerVec == 0 && norm_smem_bytes(m, k) <= kMaxNormSmem;
}

void launch_gemv_norm(const GemvParams& p, const GemvNormParams& n, cudaStream_t stream,
                      const LaunchPolicy& policy, const GemvLaunchOptions& options) {
  TPS_CHECK(gemv_norm_fits(p.m, p.k) && n.residual != nullptr && n.norm_weight != nullptr &&
                n.normed != nullptr && n.arrivals != nullptr,
            "gemv_norm: ", p.m, " rows of ", p.k, " (at most ", kMmaCols,
            " rows; buffers and the arrival counter set)");
  if (options.staged_sms > 0 && launch_gemv_staged(p, &n, options, stream, policy)) return;
  dim3 grid, block;
  gemv_shape(p, grid, block);
  const size_t smem = norm_smem_bytes(p.m, p.k);
  if (p.out_f32 != nullptr)
    launch(policy, Site::kGemv, Pdl::kEnrolled, gemv_norm_kernel<1, float>, grid, block, smem, stream, p, n);
  else
    launch(policy, Site::kGemv, Pdl::kEnrolled, gemv_norm_kernel<1, bf16>, grid, block, smem, stream, p, n);
}

}  // namespace tpserve::kernels
