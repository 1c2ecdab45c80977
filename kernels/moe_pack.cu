// moe_pack in two kernels: (1) one block assigns every (token, slot) its row in the destination rank's
// block, in order: warp 0 walks the slots 32 at a time, ranks a slot among equal destinations with
// __match_any_sync and keeps per-rank fill counts in shared memory; (2) rows are copied in parallel.
#include "kernels/device_common.cuh"
#include "kernels/launch.h"
#include "kernels/moe_pack.h"
#include "kernels/pdl.cuh"

namespace tpserve::kernels {
namespace {

constexpr int kRouteThreads = 256;
constexpr int kCopyThreads = 128;

__global__ void __launch_bounds__(kRouteThreads) moe_pack_route_kernel(const MoePackParams p) {
  __shared__ int fill_s[kMoePackMaxPeers];
  pdl_wait_then_trigger();
  const int tid = threadIdx.x, lane = tid % kWarpSize;
  const int64_t rows = static_cast<int64_t>(p.peers) * p.capacity;
  for (int64_t r = tid; r < rows; r += kRouteThreads) p.send_expert[r] = -1;
  for (int i = tid; i < p.peers; i += kRouteThreads) fill_s[i] = 0;
  __syncthreads();
  if (tid < kWarpSize) {
    const int slots = p.tokens * p.k;
    for (int base = 0; base < slots; base += kWarpSize) {
      const int slot = base + lane;
      const bool active = slot < slots;
      const int expert = active ? p.topk_ids[slot] : 0;
      const int peer = active && expert >= 0 ? expert / p.experts_per_rank : -1;
      const unsigned same = __match_any_sync(0xffffffffu, peer);
      const int rank_in_warp = __popc(same & ((1u << lane) - 1u));
      const int fill = peer >= 0 && peer < p.peers ? fill_s[peer] : 0;
      __syncwarp();
      if (active) {
        const int n = fill + rank_in_warp;
        const bool fits = peer >= 0 && peer < p.peers && n < p.capacity;
        p.origin[slot] = fits ? peer * p.capacity + n : -1;
        if (fits)
          p.send_expert[static_cast<int64_t>(peer) * p.capacity + n] = expert - peer * p.experts_per_rank;
        // The lowest lane of each destination advances its fill count.
        if (peer >= 0 && peer < p.peers && rank_in_warp == 0) fill_s[peer] = fill + __popc(same);
      }
      __syncwarp();
    }
  }
}

__global__ void moe_pack_copy_kernel(const MoePackParams p) {
  pdl_wait_then_trigger();
  const int slot = blockIdx.x;
  const int dest = p.origin[slot];
  if (dest >= 0) {
    const bf16* src = p.x + static_cast<int64_t>(slot / p.k) * p.hidden;
    bf16* dst = p.send_x + static_cast<int64_t>(dest) * p.hidden;
    for (int v = threadIdx.x; v < p.hidden / kBf16PerVec; v += blockDim.x)
      store_vec(dst + v * kBf16PerVec, load_vec(src + v * kBf16PerVec));
  }
}

}  // namespace

void launch_moe_pack(const MoePackParams& p, cudaStream_t stream, const LaunchPolicy& policy) {
  launch(policy, Site::kMoePack, Pdl::kEnrolled, moe_pack_route_kernel, dim3(1), dim3(kRouteThreads), 0,
         stream, p);
  launch(policy, Site::kMoePack, Pdl::kEnrolled, moe_pack_copy_kernel, dim3(p.tokens * p.k),
         dim3(kCopyThreads), 0, stream, p);
}

}  // namespace tpserve::kernels
