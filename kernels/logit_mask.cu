// One thread per (mask, logit); see logit_mask.h.
#include "kernels/launch.h"
#include "kernels/logit_mask.h"
#include "kernels/pdl.cuh"

namespace tpserve::kernels {
namespace {

constexpr int kThreads = 256;

// grid: (ceil(vocab / kThreads), n)
__global__ void logit_mask_kernel(const LogitMaskParams p) {
  pdl_wait_then_trigger();  // the logits come from the lm_head (and the adjustments) before
  const int v = blockIdx.x * blockDim.x + threadIdx.x;
  if (v >= p.vocab) return;
  const int row = p.rows[blockIdx.y];
  if (row < 0 || row >= p.num_rows) return;
  const int64_t t = p.vocab_begin + v;
  const uint32_t word = p.masks[int64_t(blockIdx.y) * p.words + t / 32];
  if (!((word >> (t % 32)) & 1u)) p.logits[int64_t(row) * p.vocab + v] = -INFINITY;
}

}  // namespace

void launch_logit_mask(const LogitMaskParams& p, cudaStream_t stream, const LaunchPolicy& policy) {
  if (p.n == 0 || p.vocab == 0) return;
  launch(policy, Site::kSampling, Pdl::kEnrolled, logit_mask_kernel,
         dim3((p.vocab + kThreads - 1) / kThreads, p.n), dim3(kThreads), 0, stream, p);
}

}  // namespace tpserve::kernels
