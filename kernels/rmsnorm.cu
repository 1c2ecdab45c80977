// RMSNorm (and fused add + RMSNorm, with x optionally the MoE combine's sum): one row per block, the row held
// in registers as 16-byte vectors, fp32 math, one block reduction for the sum of squares.
#include "common/error.h"
#include "kernels/device_common.cuh"
#include "kernels/launch.h"
#include "kernels/moe_combine.cuh"
#include "kernels/pdl.cuh"
#include "kernels/phase_trace.cuh"
#include "kernels/rmsnorm.cuh"
#include "kernels/rmsnorm.h"

namespace tpserve::kernels {
TPS_PHASE_TRACE_DEFINE(g_rmsnorm_marks, TracedKernel::kRmsNorm)
namespace {

constexpr int kMaxVecPerThread = 4;
constexpr int kMaxThreads = 1024;
// The combine's loads (kernels/moe_combine.cuh) hold about 150 registers: at most 256 threads a block.
constexpr int kCombineMaxThreads = 256;
static_assert(kMaxThreads * kMaxVecPerThread * kBf16PerVec >= kRmsNormMaxHidden);
static_assert(kCombineMaxThreads * kMaxVecPerThread * kBf16PerVec >= kRmsNormCombineMaxHidden);

// kCombine: x is the MoE combine's sum (RmsNormParams::combine).
template <bool kCombine>
__global__ void __launch_bounds__(kCombine ? kCombineMaxThreads : kMaxThreads, 1)
    rmsnorm_kernel(const RmsNormParams p) {
  TPS_PHASE_MARK(g_rmsnorm_marks, 0);
  __shared__ float scratch[kMaxThreads / kWarpSize];
  const int64_t base = static_cast<int64_t>(blockIdx.x) * p.hidden;
  const int vectors = p.hidden / kBf16PerVec;
  // The combine's routing of this row's token, when read before the wait (one chunk of slots at most).
  [[maybe_unused]] CombineSlots slots;
  const bool early_routing = kCombine && p.combine_routing_before_wait && !p.combine.one_slot_at_a_time &&
                             p.combine.k <= kCombineSlotsAtOnce;
  if constexpr (kCombine)
    if (early_routing) load_combine_slots(p.combine, blockIdx.x, 0, slots);
  uint4 w[kMaxVecPerThread];  // the weights, packed (4 registers a vector), when read before the wait
  if (p.weights_before_wait) {
#pragma unroll
    for (int i = 0; i < kMaxVecPerThread; ++i) {
      const int vec = threadIdx.x + i * blockDim.x;
      if (vec >= vectors) break;
      w[i] = load_vec(p.weight + vec * kBf16PerVec);
    }
  }
  TPS_PHASE_MARK(g_rmsnorm_marks, 1);
  pdl_wait_then_trigger();
  TPS_PHASE_MARK(g_rmsnorm_marks, 2);
  float v[kMaxVecPerThread][kBf16PerVec];
  float sum_sq = 0.0f;
#pragma unroll
  for (int i = 0; i < kMaxVecPerThread; ++i) {
    const int vec = threadIdx.x + i * blockDim.x;
    if (vec >= vectors) break;
    const int64_t at = base + vec * kBf16PerVec;
    if constexpr (kCombine) {  // the combine's bf16 output, as moe_combine would store it
      if (early_routing) {
#pragma unroll
        for (int j = 0; j < kBf16PerVec; ++j) v[i][j] = 0.0f;
        add_combine_slots(p.combine, slots, vec * kBf16PerVec, v[i]);
      } else {
        combine_piece(p.combine, blockIdx.x, vec * kBf16PerVec, v[i]);
      }
      unpack_bf16x8(pack_bf16x8(v[i]), v[i]);
    } else {
      unpack_bf16x8(load_vec(p.x + at), v[i]);
    }
    if (p.residual != nullptr) add_residual_piece(p.residual + at, v[i]);
#pragma unroll
    for (int j = 0; j < kBf16PerVec; ++j) sum_sq += v[i][j] * v[i][j];
  }
  TPS_PHASE_MARK(g_rmsnorm_marks, 3);
  sum_sq = block_sum(sum_sq, scratch);
  TPS_PHASE_MARK(g_rmsnorm_marks, 4);
  const float inv = 1.0f / sqrtf(sum_sq / static_cast<float>(p.hidden) + p.eps);
#pragma unroll
  for (int i = 0; i < kMaxVecPerThread; ++i) {
    const int vec = threadIdx.x + i * blockDim.x;
    if (vec >= vectors) break;
    bf16* out = p.out + base + vec * kBf16PerVec;
    if (p.weights_before_wait)
      store_normed_piece(w[i], v[i], inv, out);
    else
      store_normed_piece(p.weight + vec * kBf16PerVec, v[i], inv, out);
  }
  TPS_PHASE_MARK_AFTER_BLOCK(g_rmsnorm_marks, 5);
}

}  // namespace

void launch_rmsnorm(const RmsNormParams& p, cudaStream_t stream, const LaunchPolicy& policy) {
  const bool combine = p.combine.k > 0;
  TPS_CHECK(p.hidden <= (combine ? kRmsNormCombineMaxHidden : kRmsNormMaxHidden), "rmsnorm: hidden ",
            p.hidden, combine ? " with the MoE combine" : "", " above the limit");
  const int vectors = p.hidden / kBf16PerVec, max_threads = combine ? kCombineMaxThreads : kMaxThreads;
  // As few vectors per thread as max_threads allow (<= kMaxVecPerThread for hidden within the limit).
  const int per_thread = (vectors + max_threads - 1) / max_threads;
  int threads = (vectors + per_thread - 1) / per_thread;
  threads = ((threads + kWarpSize - 1) / kWarpSize) * kWarpSize;
  const Site site = p.residual != nullptr ? Site::kAddRmsNorm : Site::kRmsNorm;
  launch(policy, site, Pdl::kEnrolled, combine ? rmsnorm_kernel<true> : rmsnorm_kernel<false>, dim3(p.tokens),
         dim3(threads), 0, stream, p);
}

}  // namespace tpserve::kernels
