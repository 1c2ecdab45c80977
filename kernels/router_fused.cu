// The fused router (kernels/router_fused.h): one cluster of kRouterClusterBlocks blocks of 8 warps. Block r
// owns experts [16 r, 16 r + 16); warp w of a block owns the w-th eighth of the k range of that 16-row tile.
//   before the PDL wait: cp.async of the norm weights (one group) and of the block's router rows (another);
//   the norm:   every block, for every row: v = bf16(residual + x) into shared memory, each thread's sum of
//               squares per row, summed per row by one warp in a fixed order; then v = bf16(w * v * inv)
//               in place. Same code and block shape in every block, so every block holds the same bits.
//   logits:     the block's 16 x T tile on tensor cores (kernels/staged_tile.cuh), the warps' k ranges
//               summed in a fixed order, into the block's shared memory;
//   cluster barrier; block 0 gathers all logits through distributed shared memory; each block stores its
//   eighth of the columns of residual and normed (no block reads residual after the first barrier);
//   cluster barrier (block 0 is done reading the others' shared memory); block 0 gates (one warp a token)
//   and stores the logits. With p.stores_after_gather blocks 1..7 store a seventh of the columns each
//   after the second barrier instead, while block 0 gates.
//   With p.push_logits each block's warp 0 stores its logits straight into block 0's gathered array instead
//   (distributed shared memory), so one barrier does: block 0 gates right after it, while blocks 1..7 store
//   a seventh of the columns each. The cluster's blocks arrive at a barrier on entry and wait for it before
//   the first remote store, so that block 0's shared memory exists when they write it.
#include <cooperative_groups.h>

#include "common/error.h"
#include "kernels/launch.h"
#include "kernels/mma_tile.cuh"
#include "kernels/pdl.cuh"
#include "kernels/phase_trace.cuh"
#include "kernels/rmsnorm.cuh"
#include "kernels/router_fused.h"
#include "kernels/staged_tile.cuh"
#include "kernels/topk_gating.cuh"

namespace tpserve::kernels {
TPS_PHASE_TRACE_DEFINE(g_router_marks, TracedKernel::kRouterFused)
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / kWarpSize;
constexpr int kPerLane = kRouterFusedMaxExperts / kWarpSize;  // the gating's experts per lane
constexpr int kRowsAtOnce = 4;                                // rows whose loads the norm issues together

__host__ __device__ constexpr size_t align16(size_t n) {
  return (n + 15) / 16 * 16;
}

// Byte offsets of a block's shared memory.
struct RouterSmem {
  size_t w = 0, x = 0, norm_w = 0, part = 0, inv = 0, logits = 0, all = 0, total = 0;
  __host__ __device__ RouterSmem(int tokens, int hidden, int experts) {
    const size_t row_bytes = staged_tile_bytes(hidden) / kMmaRows;
    const size_t scratch = warp_tiles_scratch_floats(kWarps, 2) * sizeof(float);
    size_t at = 0;
    w = at;  // the 16 router rows; then the warps' partial tiles
    at = align16(at + (staged_tile_bytes(hidden) > scratch ? staged_tile_bytes(hidden) : scratch));
    x = at;  // [T][H + pad] bf16: v, then the normed rows
    at = align16(at + tokens * row_bytes);
    norm_w = at;  // [H] bf16
    at = align16(at + hidden * sizeof(bf16));
    part = at;  // [T][kThreads] f32: each thread's sum of squares per row
    at = align16(at + static_cast<size_t>(tokens) * kThreads * sizeof(float));
    inv = at;  // [T] f32
    at = align16(at + tokens * sizeof(float));
    logits = at;  // [T][16] f32: this block's experts
    at = align16(at + static_cast<size_t>(tokens) * kMmaRows * sizeof(float));
    all = at;  // [T][E] f32: block 0's gathered logits
    at = align16(at + static_cast<size_t>(tokens) * experts * sizeof(float));
    total = at;
  }
};

template <int NT>
__global__ void __launch_bounds__(kThreads) router_fused_kernel(const RouterFusedParams p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  TPS_PHASE_MARK(g_router_marks, 0);
  cg::cluster_group cluster = cg::this_cluster();
  extern __shared__ __align__(16) unsigned char smem[];
  const RouterSmem at(p.tokens, p.hidden, p.experts);
  bf16* w_tile = reinterpret_cast<bf16*>(smem + at.w);
  bf16* x_s = reinterpret_cast<bf16*>(smem + at.x);
  bf16* norm_w_s = reinterpret_cast<bf16*>(smem + at.norm_w);
  float* part_s = reinterpret_cast<float*>(smem + at.part);
  float* inv_s = reinterpret_cast<float*>(smem + at.inv);
  float* logits_s = reinterpret_cast<float*>(smem + at.logits);
  float* all_s = reinterpret_cast<float*>(smem + at.all);
  const int tid = threadIdx.x, lane = tid % kWarpSize, warp = tid / kWarpSize, g = lane / 4, q = lane % 4;
  const int rank = static_cast<int>(cluster.block_rank()), row0 = rank * kMmaRows;
  const int row_elems = p.hidden + kStagedRowPad, vecs = p.hidden / kBf16PerVec;
  if (p.push_logits) __cluster_barrier_arrive_relaxed();  // started (waited for before the push)

  // Before the wait: the norm weights (group 1), the block's router rows in the warp's k range (group 2).
  for (int i = tid; i < vecs; i += kThreads)
    cp_async_16(norm_w_s + i * kBf16PerVec, p.norm_weight + i * kBf16PerVec, true);
  cp_async_commit();
  int kb0, kb1;
  split_range(p.hidden / kMmaK, kWarps, warp, kb0, kb1);
  auto row_ptr = [&](int r) {
    return row0 + r < p.experts ? p.router + static_cast<int64_t>(row0 + r) * p.hidden : nullptr;
  };
  copy_rows_async(w_tile, row_elems, row_ptr, p.router, kb0, kb1, stream_hint(p.weights_evict_first));
  TPS_PHASE_MARK(g_router_marks, 1);

  pdl_wait_then_trigger();  // x and residual are predecessors' outputs
  TPS_PHASE_MARK(g_router_marks, 2);
  // v into x_s and each thread's sum of squares per row, kRowsAtOnce rows' loads in flight together.
  for (int m0 = 0; m0 < p.tokens; m0 += kRowsAtOnce) {
    float sum_sq[kRowsAtOnce] = {};
    for (int vec = tid; vec < vecs; vec += kThreads) {
      uint4 xr[kRowsAtOnce], rr[kRowsAtOnce];
#pragma unroll
      for (int u = 0; u < kRowsAtOnce; ++u) {
        if (m0 + u >= p.tokens) break;
        const int64_t off = static_cast<int64_t>(m0 + u) * p.hidden + vec * kBf16PerVec;
        xr[u] = load_vec(p.x + off);
        rr[u] = load_vec(p.residual + off);
      }
#pragma unroll
      for (int u = 0; u < kRowsAtOnce; ++u) {
        if (m0 + u >= p.tokens) break;
        float v[kBf16PerVec];
        unpack_bf16x8(xr[u], v);
        store_vec(x_s + (m0 + u) * row_elems + vec * kBf16PerVec, add_residual(rr[u], v));
#pragma unroll
        for (int j = 0; j < kBf16PerVec; ++j) sum_sq[u] += v[j] * v[j];
      }
    }
#pragma unroll
    for (int u = 0; u < kRowsAtOnce; ++u)
      if (m0 + u < p.tokens) part_s[(m0 + u) * kThreads + tid] = sum_sq[u];
  }
  __syncthreads();
  TPS_PHASE_MARK(g_router_marks, 3);
  for (int m = warp; m < p.tokens; m += kWarps) {
    float sum_sq = 0.0f;
    for (int i = lane; i < kThreads; i += kWarpSize) sum_sq += part_s[m * kThreads + i];
    sum_sq = warp_sum(sum_sq);
    if (lane == 0) inv_s[m] = 1.0f / sqrtf(sum_sq / static_cast<float>(p.hidden) + p.eps);
  }
  cp_async_wait_pending(1);  // the norm weights (the router rows may still fly)
  TPS_PHASE_MARK(g_router_marks, 9);
  __syncthreads();
  for (int i = tid; i < p.tokens * vecs; i += kThreads) {
    bf16* piece = x_s + (i / vecs) * row_elems + (i % vecs) * kBf16PerVec;
    float v[kBf16PerVec];
    unpack_bf16x8(load_vec(piece), v);
    store_normed_piece(norm_w_s + (i % vecs) * kBf16PerVec, v, inv_s[i / vecs], piece);
  }
  cp_async_wait_all();
  TPS_PHASE_MARK(g_router_marks, 10);
  __syncthreads();
  TPS_PHASE_MARK(g_router_marks, 4);

  const bf16* b[NT];  // token columns; tokens past the last read as zero
  shared_token_columns<NT>(x_s, row_elems, p.tokens, b);
  float acc[NT][4] = {};
  mma_staged<NT, 1>(acc, w_tile, row_elems, b, kb0, kb1);
  __syncthreads();  // every warp is done with the router rows: their space takes the partial tiles
  reduce_warp_tiles<NT>(acc, reinterpret_cast<float*>(w_tile), kWarps);
  if (p.push_logits) __cluster_barrier_wait();  // every block of the cluster has started
  if (warp == 0) {
    // Pushed: block 0's [T][E] array at this block's experts; else this block's own [T][16] tile.
    float* dst = p.push_logits ? cluster.map_shared_rank(all_s, 0) + row0 : logits_s;
    const int stride = p.push_logits ? p.experts : kMmaRows;
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int token = nt * kMmaCols + 2 * q + (i & 1), r = g + (i < 2 ? 0 : 8);
        if (token < p.tokens && row0 + r < p.experts) dst[token * stride + r] = acc[nt][i];
      }
  }
  TPS_PHASE_MARK(g_router_marks, 5);
  // Every block's logits are in its shared memory (pushed: in block 0's); no block reads residual any more.
  cluster.sync();
  TPS_PHASE_MARK(g_router_marks, 6);

  if (rank == 0 && !p.push_logits)
    for (int i = tid; i < p.tokens * p.experts; i += kThreads) {
      const int token = i / p.experts, e = i % p.experts;
      const float* src = cluster.map_shared_rank(logits_s, e / kMmaRows);
      all_s[i] = src[token * kMmaRows + e % kMmaRows];
    }
  // This block's share of the columns: residual = v (recomputed: the same bits), normed from x_s. An eighth
  // each before the second barrier; with p.stores_after_gather, a seventh each of blocks 1..7 after it, so
  // that block 0 gates as soon as it has gathered, while the others store.
  auto store_columns = [&](int share, int shares) {
    int c0, c1;
    split_range(vecs, shares, share, c0, c1);
    for (int i = tid; i < p.tokens * (c1 - c0); i += kThreads) {
      const int m = i / (c1 - c0), vec = c0 + i % (c1 - c0);
      const int64_t off = static_cast<int64_t>(m) * p.hidden + vec * kBf16PerVec;
      float v[kBf16PerVec];
      unpack_bf16x8(load_vec(p.x + off), v);
      add_residual_piece(p.residual + off, v);
      store_vec(p.normed + off, load_vec(x_s + m * row_elems + vec * kBf16PerVec));
    }
  };
  const bool stores_late = p.push_logits || p.stores_after_gather;
  if (!stores_late) store_columns(rank, kRouterClusterBlocks);
  if (!p.push_logits) cluster.sync();  // block 0 is done with the other blocks' shared memory
  TPS_PHASE_MARK(g_router_marks, 7);
  if (rank != 0) {
    if (stores_late) store_columns(rank - 1, kRouterClusterBlocks - 1);
    return;
  }
  for (int i = tid; i < p.tokens * p.experts; i += kThreads) p.logits[i] = all_s[i];
  TPS_PHASE_MARK(g_router_marks, 11);
  for (int m = warp; m < p.tokens; m += kWarps)
    warp_topk_gating<kPerLane>(all_s + m * p.experts, p.experts, p.k, p.renormalize,
                               p.weights + static_cast<int64_t>(m) * p.k,
                               p.ids + static_cast<int64_t>(m) * p.k, p.redux_gating, p.gating_by_logits);
  TPS_PHASE_MARK_AFTER_BLOCK(g_router_marks, 8);
#else
  __trap();  // launched only on SM90+ (clusters)
#endif
}

}  // namespace

bool router_fused_available(int device_sm) {
  return runs_sm90_code(reinterpret_cast<const void*>(router_fused_kernel<1>), device_sm);
}

bool router_fused_fits(const RouterFusedParams& p) {
  return p.tokens >= 1 && p.tokens <= kRouterFusedMaxTokens && p.k >= 1 && p.k <= kGatingMaxK &&
         p.experts >= p.k && p.experts <= kRouterFusedMaxExperts && p.hidden > 0 && p.hidden % kMmaK == 0;
}

size_t router_fused_smem_bytes(const RouterFusedParams& p) {
  return RouterSmem(p.tokens, p.hidden, p.experts).total;
}

void launch_router_fused(const RouterFusedParams& p, size_t smem, cudaStream_t stream,
                         const LaunchPolicy& policy) {
  TPS_CHECK(router_fused_fits(p), "router_fused: T=", p.tokens, " E=", p.experts, " k=", p.k, " H=", p.hidden,
            " outside its limits");
  auto kernel = p.tokens <= kMmaCols ? router_fused_kernel<1> : router_fused_kernel<2>;
  launch_clusters(policy, Site::kTopkGating, Pdl::kEnrolled, kRouterClusterBlocks, kernel,
                  dim3(kRouterClusterBlocks), dim3(kThreads), smem, stream, p);
}

}  // namespace tpserve::kernels
