// Token draw from the candidates of R ranks (backend.h: sample), exactly as the CPU reference: merge to the
// best C, greedy = best; otherwise temperature, top-k, min-p and top-p within the C best, then a Gumbel-max
// draw keyed by (seed, counter, token id) in double precision (common/counter_hash.h).
// With `drafts` (speculative verification, backend.h: verify_and_sample) each row's draft is accepted iff the
// row's draw is the draft (probability p(draft); a rejection leaves the draw, p without the draft: the
// residual); launch_verify_groups then walks each group's rows.
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
  int32_t* tokens = nullptr;           // [S] the draw (with drafts too: a rejected draft leaves it)
  const int32_t* drafts = nullptr;  // [S] draft proposed for the position after the row; -1: none (optional)
  int32_t* accept = nullptr;        // [S] 1 if the row's draft is accepted (with drafts)
  int ranks = 0;                    // R
  int rows = 0;                     // S
  int candidates = 0;               // C
};

void launch_sample(const SampleParams& p, cudaStream_t stream, const LaunchPolicy& policy);

struct VerifyGroupsParams {
  const int32_t* row_tokens = nullptr;  // [S] input token of each sampled row (row r + 1 holds row r's draft)
  const int32_t* group_start = nullptr;  // [G + 1]
  int32_t* drafts = nullptr;        // [S] out: row r's draft (row_tokens[r + 1] inside its group), else -1
  const int32_t* draws = nullptr;   // [S] SampleParams::tokens
  const int32_t* accept = nullptr;  // [S] SampleParams::accept
  int32_t* emitted = nullptr;       // [S] out: accepted drafts, then the draw; -1 past a rejection
  int32_t* accepted = nullptr;      // [G] out: drafts taken
  int groups = 0;
};

// Fills `drafts` from row_tokens (call before launch_sample).
void launch_verify_drafts(const VerifyGroupsParams& p, int rows, cudaStream_t stream,
                          const LaunchPolicy& policy);
// Accepts left to right within each group (after launch_sample).
void launch_verify_groups(const VerifyGroupsParams& p, cudaStream_t stream, const LaunchPolicy& policy);

}  // namespace tpserve::kernels
