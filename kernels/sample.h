// Token draw from the candidates of R ranks (backend.h: sample), exactly as the CPU reference: merge to the
// best C, greedy = best; otherwise temperature, top-k, min-p and top-p within the C best, then a Gumbel-max
// draw keyed by (seed, counter, token id) in double precision (common/counter_hash.h).
#pragma once

#include <cstddef>

#include "kernels/kernel_api.h"

namespace tpserve::kernels {

struct SampleParams {
  const float* values = nullptr;       // [R, S, C] each rank's candidates, sorted (value desc, id asc)
  const int32_t* ids = nullptr;        // [R, S, C] global token ids (distinct across ranks)
  const float* stats = nullptr;        // [R, S, 2] each rank's [max, sum exp((logit - max) / T)]
  const float* temperature = nullptr;  // [S] 0 = greedy
  const int32_t* top_k = nullptr;      // [S] 0 = off
  const float* top_p = nullptr;        // [S] 1 = off
  const float* min_p = nullptr;        // [S] 0 = off
  const int64_t* seed = nullptr;       // [S]
  const int64_t* counter = nullptr;    // [S]
  int32_t* tokens = nullptr;           // [S]
  int ranks = 0;                       // R
  int rows = 0;                        // S
  int candidates = 0;                  // C
};

void launch_sample(const SampleParams& p, cudaStream_t stream, const LaunchPolicy& policy);

}  // namespace tpserve::kernels
