// Sampling draw: one block per row. The R sorted lists are merged by rank: an element's place in the merged
// order is its index in its list plus, for every other list, how many of its elements are better (binary
// search). Thread 0 applies the filters in the CPU reference's order and arithmetic (float logits, double
// normaliser and cumulative sum, all probability terms computed in parallel beforehand); the Gumbel keys are
// computed in parallel and reduced to the first maximum. Sums of products are written with explicit
// roundings so that nvcc does not fuse them into FMAs the host does not use.
#include <cfloat>
#include <climits>

#include "common/counter_hash.h"
#include "kernels/device_common.cuh"
#include "kernels/launch.h"
#include "kernels/pdl.cuh"
#include "kernels/sample.h"

namespace tpserve::kernels {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ bool better(float va, int32_t ia, float vb, int32_t ib) {
  return va > vb || (va == vb && ia < ib);
}

__global__ void __launch_bounds__(kThreads) sample_kernel(const SampleParams p) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int c = p.candidates;
  auto* terms = reinterpret_cast<double*>(smem);  // [C] top-p probability terms
  auto* merged_v = reinterpret_cast<float*>(terms + c);
  auto* merged_id = reinterpret_cast<int32_t*>(merged_v + c);
  __shared__ int keep_s;
  __shared__ float max_s;
  __shared__ double z_s;
  __shared__ double best_key_s[kThreads / kWarpSize];
  __shared__ int best_j_s[kThreads / kWarpSize];
  pdl_wait_then_trigger();
  const int row = blockIdx.x, tid = threadIdx.x;
  const float temp = p.temperature[row];
  auto list = [&](int r) { return (static_cast<int64_t>(r) * p.rows + row) * c; };

  const int32_t draft = p.drafts != nullptr ? p.drafts[row] : -1;
  if (!(temp > 0.0f)) {  // greedy: the best head of the R lists
    if (tid == 0) {
      float v = p.values[list(0)];
      int32_t id = p.ids[list(0)];
      for (int r = 1; r < p.ranks; ++r)
        if (better(p.values[list(r)], p.ids[list(r)], v, id)) v = p.values[list(r)], id = p.ids[list(r)];
      p.tokens[row] = id;
      if (p.accept != nullptr) p.accept[row] = draft >= 0 && draft == id ? 1 : 0;
    }
    return;
  }

  for (int idx = tid; idx < p.ranks * c; idx += kThreads) {
    const int r = idx / c, j = idx % c;
    const float v = p.values[list(r) + j];
    const int32_t id = p.ids[list(r) + j];
    int pos = j;
    for (int other = 0; other < p.ranks && pos < c; ++other) {
      if (other == r) continue;
      const float* ov = p.values + list(other);
      const int32_t* oi = p.ids + list(other);
      int lo = 0, hi = c;  // count of the other list's elements better than (v, id)
      while (lo < hi) {
        const int mid = (lo + hi) / 2;
        if (better(ov[mid], oi[mid], v, id))
          lo = mid + 1;
        else
          hi = mid;
      }
      pos += lo;
    }
    if (pos < c) merged_v[pos] = v, merged_id[pos] = id;
  }
  if (tid == 0) {
    float global_max = -INFINITY;
    for (int r = 0; r < p.ranks; ++r)
      global_max = fmaxf(global_max, p.stats[(static_cast<int64_t>(r) * p.rows + row) * 2]);
    double z = 0.0;
    for (int r = 0; r < p.ranks; ++r) {
      const float* st = p.stats + (static_cast<int64_t>(r) * p.rows + row) * 2;
      // Explicit roundings (no fused multiply-add), as the host computes it.
      z = __dadd_rn(
          z, __dmul_rn(static_cast<double>(st[1]), static_cast<double>(expf((st[0] - global_max) / temp))));
    }
    max_s = global_max;
    z_s = z;
  }
  __syncthreads();
  const float top_p = p.top_p[row];
  // Weights exp((v - max) / T) of every candidate, in parallel; the sums below run in the CPU's order.
  for (int n = tid; n < c; n += kThreads) terms[n] = static_cast<double>(expf((merged_v[n] - max_s) / temp));
  __syncthreads();
  const uint64_t seed = static_cast<uint64_t>(p.seed[row]), counter = static_cast<uint64_t>(p.counter[row]);
  if (tid == 0) {
    int keep = c;
    const int top_k = p.top_k[row];
    if (top_k > 0) keep = min(keep, top_k);
    const float min_p = p.min_p[row];
    if (min_p > 0.0f) {
      const float threshold = __fadd_rn(merged_v[0], __fmul_rn(temp, logf(min_p)));
      int n = 1;
      while (n < keep && merged_v[n] >= threshold) ++n;
      keep = n;
    }
    if (top_p < 1.0f) {
      // The nucleus of the distribution left by top-k and min-p (renormalised), else of the full one.
      double z = z_s;
      if (top_k > 0 || min_p > 0.0f) {
        z = 0.0;
        for (int j = 0; j < keep; ++j) z += terms[j];
      }
      double cumulative = 0.0;
      int n = 0;
      while (n < keep) {
        cumulative += terms[n] / z;
        ++n;
        if (cumulative >= top_p) break;
      }
      keep = max(n, 1);
    }
    keep_s = keep;
  }
  __syncthreads();
  double best = -INFINITY;
  int best_j = INT_MAX;
  for (int j = tid; j < keep_s; j += kThreads) {
    const double gumbel = -log(-log(uniform_open01(seed, counter, static_cast<uint64_t>(merged_id[j]))));
    const double key = static_cast<double>(merged_v[j] / temp) + gumbel;
    if (key > best || (key == best && j < best_j)) best = key, best_j = j;
  }
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    const double other = __shfl_xor_sync(0xffffffffu, best, offset);
    const int other_j = __shfl_xor_sync(0xffffffffu, best_j, offset);
    if (other > best || (other == best && other_j < best_j)) best = other, best_j = other_j;
  }
  if (tid % kWarpSize == 0) best_key_s[tid / kWarpSize] = best, best_j_s[tid / kWarpSize] = best_j;
  __syncthreads();
  if (tid == 0) {
    for (int w = 1; w < kThreads / kWarpSize; ++w)
      if (best_key_s[w] > best || (best_key_s[w] == best && best_j_s[w] < best_j))
        best = best_key_s[w], best_j = best_j_s[w];
    const int32_t token = merged_id[best_j == INT_MAX ? 0 : best_j];
    p.tokens[row] = token;
    // A draft is accepted iff the row's draw is it: with probability p(draft), and a rejected draft leaves
    // the draw, p conditioned on another token (the residual). The CPU reference's verify_and_sample.
    if (p.accept != nullptr) p.accept[row] = draft >= 0 && token == draft ? 1 : 0;
  }
}

// One thread per row: the draft of row r is the input token of row r + 1 when both are in one group.
__global__ void verify_drafts_kernel(const VerifyGroupsParams p, int rows) {
  pdl_wait_then_trigger();
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r < rows) {
    int lo = 0, hi = p.groups;  // the group holding row r: the last g with group_start[g] <= r
    while (hi - lo > 1) {
      const int mid = (lo + hi) / 2;
      if (p.group_start[mid] <= r)
        lo = mid;
      else
        hi = mid;
    }
    p.drafts[r] = r + 1 < p.group_start[lo + 1] ? p.row_tokens[r + 1] : -1;
  }
}

// One thread per group: accepted drafts left to right, then the row's draw (the residual or the bonus).
__global__ void verify_groups_kernel(const VerifyGroupsParams p) {
  pdl_wait_then_trigger();
  const int g = blockIdx.x * blockDim.x + threadIdx.x;
  if (g < p.groups) {
    const int begin = p.group_start[g], end = p.group_start[g + 1];
    int taken = 0;
    bool open = true;
    for (int r = begin; r < end; ++r) {
      if (!open) {
        p.emitted[r] = -1;
        continue;
      }
      if (r + 1 < end && p.accept[r]) {
        p.emitted[r] = p.drafts[r];
        ++taken;
      } else {
        p.emitted[r] = p.draws[r];
        open = false;
      }
    }
    p.accepted[g] = taken;
  }
}

}  // namespace

void launch_verify_drafts(const VerifyGroupsParams& p, int rows, cudaStream_t stream,
                          const LaunchPolicy& policy) {
  launch(policy, Site::kMtpVerify, Pdl::kEnrolled, verify_drafts_kernel, dim3((rows + 127) / 128), dim3(128),
         0, stream, p, rows);
}

void launch_verify_groups(const VerifyGroupsParams& p, cudaStream_t stream, const LaunchPolicy& policy) {
  launch(policy, Site::kMtpVerify, Pdl::kEnrolled, verify_groups_kernel, dim3((p.groups + 127) / 128),
         dim3(128), 0, stream, p);
}

void launch_sample(const SampleParams& p, cudaStream_t stream, const LaunchPolicy& policy) {
  const size_t smem = static_cast<size_t>(p.candidates) * (sizeof(double) + sizeof(float) + sizeof(int32_t));
  launch(policy, Site::kSampling, Pdl::kEnrolled, sample_kernel, dim3(p.rows), dim3(kThreads), smem, stream,
         p);
}

}  // namespace tpserve::kernels
