// The one-shot all-reduce kernel (see the header for the protocol). One block per region of at most
// kOneShotRegionBytes; flags are written with st.release.sys and read with ld.acquire.sys, peer data with
// L1-bypassing loads, in 16-byte pieces when the message is made of them (at least 4 KB a block: one piece
// per thread).
#include <algorithm>

#include "common/error.h"
#include "kernels/device_common.cuh"
#include "kernels/launch.h"
#include "kernels/one_shot_all_reduce.h"
#include "kernels/pdl.cuh"
#include "kernels/rmsnorm.cuh"

namespace tpserve::kernels {
namespace {

constexpr int kThreads = 256;
constexpr size_t kMinBytesPerBlock = size_t(4) << 10;  // small messages: few blocks, few barriers
// A peer that has not arrived after this long has stopped (ranks enter a step together, microseconds
// apart): the kernel traps, the host's next CUDA call fails and the rank exits, instead of spinning forever.
constexpr uint64_t kPeerWaitLimitNs = uint64_t(20) * 1000 * 1000 * 1000;

__device__ __forceinline__ uint64_t global_timer_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ void store_release_sys(uint32_t* p, uint32_t v) {
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ uint32_t load_acquire_sys(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// Block b's barrier for call `call`: tells every peer that this block's region is written (the release covers
// the block's writes, ordered before it by the barrier), then waits for block b of every rank.
__device__ __forceinline__ void arrive_and_wait(const OneShotAllReduceParams& p, int b, uint32_t call) {
  __syncthreads();
  if (threadIdx.x < p.ranks) {
    store_release_sys(p.flags[threadIdx.x] + b * kOneShotMaxRanks + p.rank, call);
    const uint32_t* flag = p.flags[p.rank] + b * kOneShotMaxRanks + threadIdx.x;
    const uint64_t start = global_timer_ns();
    while (static_cast<int32_t>(load_acquire_sys(flag) - call) < 0) {
      if (global_timer_ns() - start > kPeerWaitLimitNs) {
        printf("tpserve one-shot all-reduce: rank %d waited 20 s for rank %d (block %d): stopping\n", p.rank,
               static_cast<int>(threadIdx.x), b);
        __trap();
      }
    }
  }
  __syncthreads();
}

// Sums one 16-byte piece of every rank's region (ranks in order, f32) into out. All ranks' loads are issued
// before the first add, so a thread waits for NVLink once, not once per rank.
template <typename T>
__device__ __forceinline__ void sum_piece(const OneShotAllReduceParams& p, size_t region, int64_t at,
                                          uint4* out) {
  constexpr int kPer = 16 / sizeof(T);
  uint4 piece[kOneShotMaxRanks];
#pragma unroll
  for (int r = 0; r < kOneShotMaxRanks; ++r)
    if (r < p.ranks)
      piece[r] = __ldcg(reinterpret_cast<const uint4*>(static_cast<const char*>(p.buffers[r]) + region) + at);
  float acc[kPer] = {};
#pragma unroll
  for (int r = 0; r < kOneShotMaxRanks; ++r) {
    if (r >= p.ranks) break;
    const T* v = reinterpret_cast<const T*>(&piece[r]);
#pragma unroll
    for (int j = 0; j < kPer; ++j) acc[j] += static_cast<float>(v[j]);
  }
  uint4 result;
  T* o = reinterpret_cast<T*>(&result);
#pragma unroll
  for (int j = 0; j < kPer; ++j) o[j] = static_cast<T>(acc[j]);
  *out = result;
}

// kVec: data and count in whole 16-byte pieces (the launcher checks), moved and summed a piece per thread;
// otherwise element by element.
template <typename T, bool kVec>
__global__ void __launch_bounds__(kThreads) one_shot_all_reduce_kernel(const OneShotAllReduceParams p) {
  constexpr int64_t kUnit = kVec ? 16 / sizeof(T) : 1;  // elements per unit of work
  const int b = blockIdx.x;
  const int64_t units = p.count / kUnit;
  const int64_t per_block = (units + gridDim.x - 1) / gridDim.x;
  const int64_t begin = min(units, b * per_block), end = min(units, begin + per_block);
  T* data = static_cast<T*>(p.data);

  // The input is the predecessor's output, and the counter the previous call's (it may be the predecessor):
  // neither is read before the predecessor has completed.
  pdl_wait_then_trigger();
  const uint32_t call = p.counters[b] + 1;  // only this block reads and writes counters[b]
  const size_t region = (call & 1u) * kOneShotMaxBytes + static_cast<size_t>(b) * kOneShotRegionBytes;
  char* mine = static_cast<char*>(p.buffers[p.rank]) + region;
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    if constexpr (kVec)
      reinterpret_cast<uint4*>(mine)[i - begin] = reinterpret_cast<const uint4*>(data)[i];
    else
      reinterpret_cast<T*>(mine)[i - begin] = data[i];
  }
  arrive_and_wait(p, b, call);

  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    if constexpr (kVec) {
      sum_piece<T>(p, region, i - begin, reinterpret_cast<uint4*>(data) + i);
    } else {
      float acc = 0.0f;
      for (int r = 0; r < p.ranks; ++r) {
        const T* peer = reinterpret_cast<const T*>(static_cast<const char*>(p.buffers[r]) + region);
        acc += static_cast<float>(__ldcg(peer + (i - begin)));
      }
      data[i] = static_cast<T>(acc);
    }
  }
  if (threadIdx.x == 0) p.counters[b] = call;
}

constexpr int kNormVecPerThread = static_cast<int>(kOneShotRegionBytes / 16 / kThreads);

// Sum + residual add + RMSNorm (OneShotAddRmsNormParams): block b owns rows [b * R, b * R + R), R = ceil(T /
// blocks); each thread sums, adds and normalises 16-byte pieces t, t + 256, ... of a row, as rmsnorm_kernel.
__global__ void __launch_bounds__(kThreads)
    one_shot_add_rmsnorm_kernel(const OneShotAllReduceParams p, const OneShotAddRmsNormParams n) {
  __shared__ float scratch[kThreads / kWarpSize];
  const int b = blockIdx.x;
  const int per_block = (n.tokens + gridDim.x - 1) / gridDim.x;
  const int row_begin = min(n.tokens, b * per_block), row_end = min(n.tokens, row_begin + per_block);
  const int vectors = n.hidden / kBf16PerVec;
  bf16* data = static_cast<bf16*>(p.data);

  pdl_wait_then_trigger();  // data, residual: predecessors' outputs; counters: the previous call's
  const uint32_t call = p.counters[b] + 1;
  const size_t region = (call & 1u) * kOneShotMaxBytes + static_cast<size_t>(b) * kOneShotRegionBytes;
  uint4* mine = reinterpret_cast<uint4*>(static_cast<char*>(p.buffers[p.rank]) + region);
  const uint4* rows_in = reinterpret_cast<const uint4*>(data) + static_cast<int64_t>(row_begin) * vectors;
  for (int64_t i = threadIdx.x; i < static_cast<int64_t>(row_end - row_begin) * vectors; i += kThreads)
    mine[i] = rows_in[i];
  arrive_and_wait(p, b, call);

  for (int row = row_begin; row < row_end; ++row) {
    const int64_t base = static_cast<int64_t>(row) * n.hidden;
    float v[kNormVecPerThread][kBf16PerVec];
    float sum_sq = 0.0f;
#pragma unroll
    for (int i = 0; i < kNormVecPerThread; ++i) {
      const int vec = threadIdx.x + i * kThreads;
      if (vec >= vectors) break;
      uint4 sum;
      sum_piece<bf16>(p, region, static_cast<int64_t>(row - row_begin) * vectors + vec, &sum);
      store_vec(data + base + vec * kBf16PerVec, sum);
      unpack_bf16x8(sum, v[i]);
      add_residual_piece(n.residual + base + vec * kBf16PerVec, v[i]);
#pragma unroll
      for (int j = 0; j < kBf16PerVec; ++j) sum_sq += v[i][j] * v[i][j];
    }
    sum_sq = block_sum(sum_sq, scratch);
    const float inv = 1.0f / sqrtf(sum_sq / static_cast<float>(n.hidden) + n.eps);
#pragma unroll
    for (int i = 0; i < kNormVecPerThread; ++i) {
      const int vec = threadIdx.x + i * kThreads;
      if (vec >= vectors) break;
      store_normed_piece(n.weight + vec * kBf16PerVec, v[i], inv, n.out + base + vec * kBf16PerVec);
    }
  }
  if (threadIdx.x == 0) p.counters[b] = call;
}

// Rows a block for T rows of H: as few as fill at most kOneShotMaxBlocks blocks.
int add_rmsnorm_rows_per_block(int tokens) {
  return (tokens + kOneShotMaxBlocks - 1) / kOneShotMaxBlocks;
}

template <typename T>
void launch_for_type(const OneShotAllReduceParams& p, int blocks, bool vec, cudaStream_t stream,
                     const LaunchPolicy& policy) {
  if (vec)
    launch(policy, Site::kAllReduce, Pdl::kEnrolled, one_shot_all_reduce_kernel<T, true>, dim3(blocks),
           dim3(kThreads), 0, stream, p);
  else
    launch(policy, Site::kAllReduce, Pdl::kEnrolled, one_shot_all_reduce_kernel<T, false>, dim3(blocks),
           dim3(kThreads), 0, stream, p);
}

}  // namespace

void launch_one_shot_all_reduce(const OneShotAllReduceParams& p, cudaStream_t stream,
                                const LaunchPolicy& policy) {
  const size_t esize = p.bf16 ? 2 : 4, bytes = static_cast<size_t>(p.count) * esize;
  TPS_CHECK(p.ranks >= 1 && p.ranks <= kOneShotMaxRanks && p.rank >= 0 && p.rank < p.ranks,
            "one-shot all-reduce: rank ", p.rank, " of ", p.ranks);
  TPS_CHECK(bytes <= kOneShotMaxBytes, "one-shot all-reduce: ", bytes, " bytes (at most ", kOneShotMaxBytes,
            ")");
  if (p.count == 0) return;
  // Blocks: at least kMinBytesPerBlock each, each region within kOneShotRegionBytes.
  const size_t by_size = (bytes + kMinBytesPerBlock - 1) / kMinBytesPerBlock;
  const size_t by_region = (bytes + kOneShotRegionBytes - 1) / kOneShotRegionBytes;
  const int blocks = static_cast<int>(std::clamp<size_t>(std::max(by_size, by_region), 1, kOneShotMaxBlocks));
  // 16-byte pieces where the size allows (decode activations: rows of hidden size): one NVLink round trip per
  // thread instead of one per element. Decided from the size alone, which every rank shares: the two paths
  // cut the message into blocks differently, so ranks must not differ in it.
  const bool vec = bytes % 16 == 0;
  TPS_CHECK(!vec || reinterpret_cast<uintptr_t>(p.data) % 16 == 0,
            "one-shot all-reduce: a message of whole 16-byte pieces must start 16-byte aligned");
  if (p.bf16)
    launch_for_type<bf16>(p, blocks, vec, stream, policy);
  else
    launch_for_type<float>(p, blocks, vec, stream, policy);
}

bool one_shot_add_rmsnorm_fits(int tokens, int hidden) {
  return tokens >= 0 && hidden > 0 && hidden % kBf16PerVec == 0 &&
         static_cast<size_t>(add_rmsnorm_rows_per_block(tokens)) * hidden * 2 <= kOneShotRegionBytes;
}

void launch_one_shot_all_reduce_add_rmsnorm(const OneShotAllReduceParams& p, const OneShotAddRmsNormParams& n,
                                            cudaStream_t stream, const LaunchPolicy& policy) {
  TPS_CHECK(p.ranks >= 1 && p.ranks <= kOneShotMaxRanks && p.rank >= 0 && p.rank < p.ranks,
            "one-shot all-reduce: rank ", p.rank, " of ", p.ranks);
  TPS_CHECK(p.bf16 && p.count == static_cast<int64_t>(n.tokens) * n.hidden &&
                one_shot_add_rmsnorm_fits(n.tokens, n.hidden),
            "one-shot all-reduce + add_rmsnorm: ", n.tokens, " rows of ", n.hidden,
            " bf16 (hidden a multiple of 8; ceil(rows / 64) rows of a block within 16 KB)");
  TPS_CHECK(
      reinterpret_cast<uintptr_t>(p.data) % 16 == 0 && reinterpret_cast<uintptr_t>(n.residual) % 16 == 0 &&
          reinterpret_cast<uintptr_t>(n.out) % 16 == 0 && reinterpret_cast<uintptr_t>(n.weight) % 16 == 0,
      "one-shot all-reduce + add_rmsnorm: buffers must be 16-byte aligned");
  if (n.tokens == 0) return;
  const int per_block = add_rmsnorm_rows_per_block(n.tokens);
  const int blocks = (n.tokens + per_block - 1) / per_block;
  launch(policy, Site::kAllReduce, Pdl::kEnrolled, one_shot_add_rmsnorm_kernel, dim3(blocks), dim3(kThreads),
         0, stream, p, n);
}

}  // namespace tpserve::kernels
