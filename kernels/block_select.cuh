// Block-wide exact top-C selection over a list in global memory, for sampling candidates:
//   radix_select: the threshold key of the C-th largest element (4 passes of 8-bit histograms);
//   compact_selected: the selected elements in index order (all keys above the threshold, then the first
//   `take_equal` keys equal to it), so that among equal values the smaller index wins;
//   bitonic_sort_desc: a block sort of 64-bit keys in shared memory.
// Keys are floats mapped to order-preserving unsigned ints (-0 maps like +0, so zeros tie).
#pragma once

#include "kernels/device_common.cuh"

namespace tpserve::kernels {

__device__ __forceinline__ uint32_t ordered_key(float f) {
  uint32_t u = __float_as_uint(f);
  if (u == 0x80000000u) u = 0;  // -0 -> +0
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

struct SelectThreshold {
  uint32_t key = 0;    // elements with a larger key are all selected
  int take_equal = 0;  // and this many of those equal to it, the first ones in index order
};

// Precondition: `want` <= the number of valid elements. key_at(i, key) returns whether element i exists.
// hist: 256 ints of shared memory; found: 2 ints of shared memory.
template <int kThreads, typename KeyAt>
__device__ SelectThreshold radix_select(KeyAt key_at, int n, int want, int* hist, int* found) {
  const int tid = threadIdx.x, lane = tid % kWarpSize;
  uint32_t prefix = 0, mask = 0;
  int remaining = want;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int b = tid; b < 256; b += kThreads) hist[b] = 0;
    __syncthreads();
    for (int i = tid; i < n; i += kThreads) {
      uint32_t key;
      if (key_at(i, key) && (key & mask) == prefix) atomicAdd(&hist[(key >> shift) & 0xffu], 1);
    }
    __syncthreads();
    if (tid < kWarpSize) {
      // Lane l covers digits 255 - 8l down to 248 - 8l: a scan over lanes walks digits from the top.
      int local = 0;
#pragma unroll
      for (int b = 0; b < 8; ++b) local += hist[255 - 8 * lane - b];
      int inclusive = local;
#pragma unroll
      for (int offset = 1; offset < kWarpSize; offset *= 2) {
        const int other = __shfl_up_sync(0xffffffffu, inclusive, offset);
        if (lane >= offset) inclusive += other;
      }
      const int above = inclusive - local;
      if (above < remaining && remaining <= inclusive) {
        int cumulative = above;
        for (int b = 0; b < 8; ++b) {
          const int digit = 255 - 8 * lane - b, count = hist[digit];
          if (remaining <= cumulative + count) {
            found[0] = digit;
            found[1] = cumulative;
            break;
          }
          cumulative += count;
        }
      }
    }
    __syncthreads();
    prefix |= static_cast<uint32_t>(found[0]) << shift;
    mask |= 0xffu << shift;
    remaining -= found[1];
    __syncthreads();  // found[] is rewritten by the next pass
  }
  return {prefix, remaining};
}

// Calls emit(i, pos) for each selected element, pos = its rank among the selected in index order.
// warp_totals: kThreads / 32 ints of shared memory.
template <int kThreads, typename KeyAt, typename Emit>
__device__ void compact_selected(KeyAt key_at, int n, SelectThreshold t, int* warp_totals, Emit emit) {
  int equal_before = 0, selected_before = 0;
  for (int tile = 0; tile < n; tile += kThreads) {
    const int i = tile + threadIdx.x;
    uint32_t key = 0;
    const bool valid = i < n && key_at(i, key);
    const bool greater = valid && key > t.key, equal = valid && key == t.key;
    int equal_total, selected_total;
    const int equal_rank =
        equal_before + block_exclusive_scan<kThreads>(equal ? 1 : 0, warp_totals, equal_total);
    const bool selected = greater || (equal && equal_rank < t.take_equal);
    const int pos =
        selected_before + block_exclusive_scan<kThreads>(selected ? 1 : 0, warp_totals, selected_total);
    if (selected) emit(i, pos);
    equal_before += equal_total;
    selected_before += selected_total;
  }
}

// Sorts keys[0, n) in descending order; n a power of two.
template <int kThreads>
__device__ void bitonic_sort_desc(unsigned long long* keys, int n) {
  for (int size = 2; size <= n; size <<= 1) {
    for (int stride = size >> 1; stride > 0; stride >>= 1) {
      for (int i = threadIdx.x; i < n; i += kThreads) {
        const int j = i ^ stride;
        if (j > i) {
          const unsigned long long a = keys[i], b = keys[j];
          const bool descending = (i & size) == 0;
          if (descending ? a < b : a > b) keys[i] = b, keys[j] = a;
        }
      }
      __syncthreads();
    }
  }
}

}  // namespace tpserve::kernels
