// Sampling candidates of one rank: per row, the C largest logits of the rank's vocabulary slice in
// descending order (ties to the smaller id; ids are global), and [max, sum exp((logit - max) / T)] over the
// slice (T = temperature, 1 when greedy). Two stages: blocks select the top C of fixed-size chunks of the
// row in parallel, then one block per row selects and sorts the top C of the chunks' candidates. Greedy rows
// (temperature <= 0) skip both selections: their best logit fills all C positions (Backend's contract).
#pragma once

#include <cstddef>

#include "kernels/kernel_api.h"

namespace tpserve::kernels {

inline constexpr int kMaxSamplingCandidates = 4096;

struct SamplingCandidatesParams {
  const float* logits = nullptr;       // [S, V]
  const float* temperature = nullptr;  // [S]
  float* values = nullptr;             // [S, C]
  int32_t* ids = nullptr;              // [S, C]
  float* stats = nullptr;              // [S, 2]
  float* chunk_values = nullptr;       // [S, num_chunks, C] scratch
  int32_t* chunk_ids = nullptr;        // [S, num_chunks, C] scratch
  float* chunk_stats = nullptr;        // [S, num_chunks, 2] scratch
  int64_t vocab_begin = 0;             // global id of column 0
  int rows = 0;                        // S
  int vocab = 0;                       // V
  int candidates = 0;                  // C, 1..min(V, kMaxSamplingCandidates)
  int chunk_size = 0;                  // set by plan_sampling_candidates
  int num_chunks = 0;
};

// Chooses the chunking for V and C and returns the scratch bytes one row needs.
size_t plan_sampling_candidates(SamplingCandidatesParams& p);

void launch_sampling_candidates(const SamplingCandidatesParams& p, cudaStream_t stream,
                                const LaunchPolicy& policy);

}  // namespace tpserve::kernels
