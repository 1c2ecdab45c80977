// One thread per adjustment; see logit_adjust.h.
#include "kernels/launch.h"
#include "kernels/logit_adjust.h"
#include "kernels/pdl.cuh"

namespace tpserve::kernels {
namespace {

constexpr int kThreads = 128;

__global__ void logit_adjust_kernel(const LogitAdjustParams p) {
  pdl_wait_then_trigger();  // the logits come from the lm_head before
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= p.n) return;
  const int row = p.targets[2 * i];
  const int64_t column = int64_t(p.targets[2 * i + 1]) - p.vocab_begin;
  if (row < 0 || row >= p.rows || column < 0 || column >= p.vocab) return;  // another rank's slice
  float* logit = p.logits + int64_t(row) * p.vocab + column;
  const float bias = p.values[3 * i], scale = p.values[3 * i + 1], subtract = p.values[3 * i + 2];
  float x = *logit + bias;
  x = x > 0.0f ? x / scale : x * scale;
  *logit = x - subtract;
}

}  // namespace

void launch_logit_adjust(const LogitAdjustParams& p, cudaStream_t stream, const LaunchPolicy& policy) {
  if (p.n == 0) return;
  launch(policy, Site::kSampling, Pdl::kEnrolled, logit_adjust_kernel, dim3((p.n + kThreads - 1) / kThreads),
         dim3(kThreads), 0, stream, p);
}

}  // namespace tpserve::kernels
