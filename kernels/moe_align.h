// MoE routing on the GPU: groups the (token, slot) assignments by local expert and cuts each expert's
// group into work items of at most kMoeTileTokens assignments, into worst-case sized buffers, so that the
// expert kernels run with a static grid (graph-capturable, no host round trip).
#pragma once

#include "kernels/kernel_api.h"

namespace tpserve::kernels {

inline constexpr int kMoeTileTokens = 16;    // assignments per work item (two 8-column MMA tiles)
inline constexpr int kMoeMaxExperts = 1024;  // local experts

struct MoeAlignParams {
  const int32_t* expert_of = nullptr;  // [A] expert of each assignment (e.g. topk_ids flattened)
  int num_assignments = 0;             // A
  int expert_begin = 0;                // local expert = expert_of - expert_begin; outside [0, E): not here
  int num_experts = 0;                 // E, <= kMoeMaxExperts
  int max_work = 0;                    // capacity of work: moe_max_work_items(A, E)
  int32_t* sorted = nullptr;           // [A] assignment indices grouped by expert (order within one expert
                                       //     is arbitrary: every assignment is computed independently)
  int32_t* work = nullptr;             // [max_work, 3] (local expert, first index into sorted, count)
  int32_t* num_work = nullptr;         // [1]
};

// Upper bound of work items for A assignments over E experts.
inline int moe_max_work_items(int assignments, int experts) {
  const int bound = assignments / kMoeTileTokens + (experts < assignments ? experts : assignments);
  return bound < assignments ? bound : assignments;
}

void launch_moe_align(const MoeAlignParams& p, cudaStream_t stream, const LaunchPolicy& policy);

}  // namespace tpserve::kernels
