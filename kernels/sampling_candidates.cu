// Sampling candidates: (1) grid (chunk, row): exact top-C of a chunk by radix select, written in index order,
// plus the chunk's max and sum of exp; (2) grid (row): exact top-C of the chunks' candidates (still in id
// order), sorted by (value desc, id asc) with a bitonic sort of (key, ~position) in shared memory; the
// chunk statistics are merged into the row's [max, sum].
#include <algorithm>

#include "kernels/block_select.cuh"
#include "kernels/launch.h"
#include "kernels/pdl.cuh"
#include "kernels/sampling_candidates.h"

namespace tpserve::kernels {
namespace {

constexpr int kChunkThreads = 512;
constexpr int kMergeThreads = 1024;
constexpr int kMinChunk = 4096;

__host__ __device__ int next_pow2(int n) {
  int p = 1;
  while (p < n) p <<= 1;
  return p;
}

__device__ __forceinline__ float row_temperature(const SamplingCandidatesParams& p, int row) {
  const float t = p.temperature[row];
  return t > 0.0f ? t : 1.0f;
}

// Greedy rows (temperature <= 0) are sampled from their best candidate alone.
__device__ __forceinline__ bool greedy_row(const SamplingCandidatesParams& p, int row) {
  return !(p.temperature[row] > 0.0f);
}

// Minimum over the block; scratch: one int per warp. Every thread gets the result.
__device__ __forceinline__ int block_min(int v, int* scratch) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2)
    v = min(v, __shfl_xor_sync(0xffffffffu, v, offset));
  const int warps = blockDim.x / kWarpSize;
  __syncthreads();  // scratch may still be read by an earlier reduction
  if (threadIdx.x % kWarpSize == 0) scratch[threadIdx.x / kWarpSize] = v;
  __syncthreads();
  v = scratch[0];
  for (int w = 1; w < warps; ++w) v = min(v, scratch[w]);
  return v;
}

__global__ void __launch_bounds__(kChunkThreads) candidates_chunk_kernel(const SamplingCandidatesParams p) {
  __shared__ int hist[256], found[2], warp_totals[kChunkThreads / kWarpSize];
  __shared__ float reduce_s[kChunkThreads / kWarpSize];
  pdl_wait_then_trigger();
  const int row = blockIdx.y, chunk = blockIdx.x;
  const int begin = chunk * p.chunk_size, len = min(p.chunk_size, p.vocab - begin);
  const float* logits = p.logits + static_cast<int64_t>(row) * p.vocab + begin;
  const int64_t out_base = (static_cast<int64_t>(row) * p.num_chunks + chunk) * p.candidates;

  float local_max = -INFINITY;
  for (int i = threadIdx.x; i < len; i += kChunkThreads) local_max = fmaxf(local_max, logits[i]);
  local_max = warp_max(local_max);
  if (threadIdx.x % kWarpSize == 0) reduce_s[threadIdx.x / kWarpSize] = local_max;
  __syncthreads();
  float chunk_max = -INFINITY;
  for (int w = 0; w < kChunkThreads / kWarpSize; ++w) chunk_max = fmaxf(chunk_max, reduce_s[w]);
  const float temp = row_temperature(p, row);
  float local_sum = 0.0f;
  for (int i = threadIdx.x; i < len; i += kChunkThreads) local_sum += expf((logits[i] - chunk_max) / temp);
  const float chunk_sum = block_sum(local_sum, reduce_s);
  if (threadIdx.x == 0) {
    p.chunk_stats[(static_cast<int64_t>(row) * p.num_chunks + chunk) * 2] = chunk_max;
    p.chunk_stats[(static_cast<int64_t>(row) * p.num_chunks + chunk) * 2 + 1] = chunk_sum;
  }

  auto emit = [&](int i, int pos) {
    p.chunk_values[out_base + pos] = logits[i];
    p.chunk_ids[out_base + pos] = static_cast<int32_t>(p.vocab_begin + begin + i);
  };
  if (greedy_row(p, row)) {  // only the chunk's best: its first position holding the maximum
    int first = len;
    for (int i = threadIdx.x; i < len; i += kChunkThreads)
      if (logits[i] == chunk_max) {
        first = i;
        break;
      }
    first = block_min(first, warp_totals);
    if (threadIdx.x == 0) emit(first < len ? first : 0, 0);  // no match: NaN logits
  } else if (len <= p.candidates) {
    for (int i = threadIdx.x; i < len; i += kChunkThreads) emit(i, i);
  } else {
    auto key_at = [&](int i, uint32_t& key) {
      key = ordered_key(logits[i]);
      return true;
    };
    const SelectThreshold t = radix_select<kChunkThreads>(key_at, len, p.candidates, hist, found);
    compact_selected<kChunkThreads>(key_at, len, t, warp_totals, emit);
  }
}

// The chunks' [max, sum] (staged in shared memory: st [num_chunks, 2]) merged into the row's, in chunk order.
__device__ void write_row_stats(const SamplingCandidatesParams& p, int row, const float* st) {
  const float temp = row_temperature(p, row);
  float row_max = -INFINITY, row_sum = 0.0f;
  for (int k = 0; k < p.num_chunks; ++k) row_max = fmaxf(row_max, st[2 * k]);
  for (int k = 0; k < p.num_chunks; ++k) row_sum += st[2 * k + 1] * expf((st[2 * k] - row_max) / temp);
  p.stats[2 * row] = row_max;
  p.stats[2 * row + 1] = row_sum;
}

__global__ void __launch_bounds__(kMergeThreads) candidates_merge_kernel(const SamplingCandidatesParams p) {
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ int hist[256], found[2], warp_totals[kMergeThreads / kWarpSize];
  const int sort_n = next_pow2(p.candidates);
  auto* keys = reinterpret_cast<unsigned long long*>(smem);
  auto* vals = reinterpret_cast<float*>(keys + sort_n);
  auto* ids = reinterpret_cast<int32_t*>(vals + p.candidates);
  // Per chunk, staged by all threads at once (one trip to memory, not one a chunk for a single thread): its
  // [max, sum] and, for a greedy row, its best candidate.
  auto* chunk_stats_s = reinterpret_cast<float*>(ids + p.candidates);  // [num_chunks, 2]
  float* chunk_best_s = chunk_stats_s + 2 * p.num_chunks;              // [num_chunks]
  auto* chunk_best_id_s = reinterpret_cast<int32_t*>(chunk_best_s + p.num_chunks);
  __shared__ float best_s;
  __shared__ int32_t best_id_s;
  pdl_wait_then_trigger();
  const int row = blockIdx.x, c = p.candidates;
  const int64_t base = static_cast<int64_t>(row) * p.num_chunks * c;
  const bool greedy = greedy_row(p, row);
  const float* chunk_stats = p.chunk_stats + static_cast<int64_t>(row) * p.num_chunks * 2;
  for (int k = threadIdx.x; k < p.num_chunks; k += kMergeThreads) {
    chunk_stats_s[2 * k] = chunk_stats[2 * k];
    chunk_stats_s[2 * k + 1] = chunk_stats[2 * k + 1];
    if (greedy) {
      chunk_best_s[k] = p.chunk_values[base + static_cast<int64_t>(k) * c];
      chunk_best_id_s[k] = p.chunk_ids[base + static_cast<int64_t>(k) * c];
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    write_row_stats(p, row, chunk_stats_s);
    if (greedy) {  // the best of the chunks' bests (chunks in id order: the first wins ties)
      float best = -INFINITY;
      int32_t best_id = -1;
      for (int k = 0; k < p.num_chunks; ++k) {
        const float v = chunk_best_s[k];
        if (best_id < 0 || v > best) best = v, best_id = chunk_best_id_s[k];
      }
      best_s = best;
      best_id_s = best_id;
    }
  }
  if (greedy) {
    __syncthreads();
    for (int r = threadIdx.x; r < c; r += kMergeThreads) {  // every position: the best (see the header)
      p.values[static_cast<int64_t>(row) * c + r] = best_s;
      p.ids[static_cast<int64_t>(row) * c + r] = best_id_s;
    }
    return;
  }
  auto key_at = [&](int i, uint32_t& key) {
    const int chunk = i / c, j = i % c;
    if (j >= min(c, p.vocab - chunk * p.chunk_size)) return false;
    key = ordered_key(p.chunk_values[base + i]);
    return true;
  };
  const int n = p.num_chunks * c;
  const SelectThreshold t = radix_select<kMergeThreads>(key_at, n, c, hist, found);
  compact_selected<kMergeThreads>(key_at, n, t, warp_totals, [&](int i, int pos) {
    const float v = p.chunk_values[base + i];
    vals[pos] = v;
    ids[pos] = p.chunk_ids[base + i];
    // Position breaks ties: selected elements are in id order, so the smaller position is the smaller id.
    keys[pos] =
        (static_cast<unsigned long long>(ordered_key(v)) << 32) | (0xffffffffu - static_cast<uint32_t>(pos));
  });
  for (int i = c + threadIdx.x; i < sort_n; i += kMergeThreads) keys[i] = 0;
  __syncthreads();
  bitonic_sort_desc<kMergeThreads>(keys, sort_n);
  for (int r = threadIdx.x; r < c; r += kMergeThreads) {
    const int pos = static_cast<int>(0xffffffffu - static_cast<uint32_t>(keys[r]));
    p.values[static_cast<int64_t>(row) * c + r] = vals[pos];
    p.ids[static_cast<int64_t>(row) * c + r] = ids[pos];
  }
}

}  // namespace

size_t plan_sampling_candidates(SamplingCandidatesParams& p) {
  p.chunk_size = std::min(p.vocab, std::max(kMinChunk, 4 * p.candidates));
  p.num_chunks = (p.vocab + p.chunk_size - 1) / p.chunk_size;
  return static_cast<size_t>(p.num_chunks) * (static_cast<size_t>(p.candidates) * 8 + 8);
}

void launch_sampling_candidates(const SamplingCandidatesParams& p, cudaStream_t stream,
                                const LaunchPolicy& policy) {
  launch(policy, Site::kSampling, Pdl::kEnrolled, candidates_chunk_kernel, dim3(p.num_chunks, p.rows),
         dim3(kChunkThreads), 0, stream, p);
  // Shared memory: the sort's keys, the selected values and ids, and the chunks' staged stats and bests.
  const size_t smem = static_cast<size_t>(next_pow2(p.candidates)) * 8 +
                      static_cast<size_t>(p.candidates) * 8 + static_cast<size_t>(p.num_chunks) * 16;
  launch(policy, Site::kSampling, Pdl::kEnrolled, candidates_merge_kernel, dim3(p.rows), dim3(kMergeThreads),
         smem, stream, p);
}

}  // namespace tpserve::kernels
