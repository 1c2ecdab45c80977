// Fused MoE experts: for every work item of moe_align (one expert, up to kMoeTileTokens assignments), the
// expert's weights are read once for all its assignments:
//   gate_up kernel: act[a, :] = silu(gate_e . x[row(a)]) * (up_e . x[row(a)])     (bf16, [A, I])
//   down kernel:    y[a, :]   = down_e . act[a, :]                                (f32 or bf16, [A, H])
// The routing weight is not applied here: moe_combine sums weight * y per token in slot order, which keeps
// the result deterministic (no atomics) and lets moe_experts_rows write its rows directly.
#pragma once

#include "kernels/kernel_api.h"

namespace tpserve::kernels {

struct MoeExpertsParams {
  const bf16* x = nullptr;          // [rows, H]; assignment a reads row a / x_row_divisor
  int x_row_divisor = 1;            // k for (token, slot) assignments, 1 for one assignment per row
  const bf16* gate_up = nullptr;    // [E, 2I, H]: gate rows then up rows of each expert
  const bf16* down = nullptr;       // [E, H, I]
  const int32_t* sorted = nullptr;  // from moe_align
  const int32_t* work = nullptr;    // [max_work, 3]
  const int32_t* num_work = nullptr;
  int max_work = 0;
  bf16* act = nullptr;     // [A, I] scratch
  float* y_f32 = nullptr;  // [A, H] output per assignment, or
  bf16* y_bf16 = nullptr;  // [A, H] (exactly one of the two is set)
  int hidden = 0;          // H, a multiple of 8
  int inter = 0;           // I, a multiple of 8
};

void launch_moe_experts(const MoeExpertsParams& p, cudaStream_t stream, const LaunchPolicy& policy);

// Routing fused into the gate_up kernel, for decode-sized steps: every gate_up block computes the top-k
// gating of all T tokens and groups the assignments into work items in shared memory (as moe_align would,
// each expert's assignments in slot order) and picks its own; block (0, 0) also writes the gating, the
// sorted list, the work items and their count for the down kernel and the combine. Two launches fewer than
// top-k -> align -> gate_up, at the price of a few hundred cycles of redundant routing per block.
inline constexpr int kMoeRoutedMaxAssignments = 64;  // T * k at most (one thread per assignment)

struct MoeRoutingParams {
  const float* router_logits = nullptr;  // [T, E_all] f32
  int tokens = 0;                        // T
  int num_experts_all = 0;               // E_all <= kGatingMaxExperts
  int k = 0;                             // 1..min(E_all, kGatingMaxK); T * k <= kMoeRoutedMaxAssignments
  bool renormalize = false;
  int expert_begin = 0;         // local experts: [expert_begin, expert_begin + num_experts)
  int num_experts = 0;          // E (the experts' weights hold E)
  float* weights = nullptr;     // [T, k] out: gating weights, most probable first
  int32_t* ids = nullptr;       // [T, k] out: expert ids (global)
  int32_t* sorted = nullptr;    // [T * k] out: moe_align's sorted list (MoeExpertsParams::sorted)
  int32_t* work = nullptr;      // [max_work, 3] out (MoeExpertsParams::work)
  int32_t* num_work = nullptr;  // [1] out (MoeExpertsParams::num_work)
};

// `e` as for launch_moe_experts, with sorted / work / num_work pointing at r's outputs and
// max_work = moe_max_work_items(T * k, E).
void launch_moe_routed_experts(const MoeRoutingParams& r, const MoeExpertsParams& e, cudaStream_t stream,
                               const LaunchPolicy& policy);

}  // namespace tpserve::kernels
