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
  // Without moe_align (slot_experts set): work item y is assignment y alone, of local expert
  // slot_experts[y] - expert_begin (no work where that is outside [0, local_experts)); sorted is then the
  // identity (sorted[a] = a, at least A entries), work and num_work are unused, and max_work is the number of
  // assignments. For one token, whose k experts are distinct, each expert is still read once, and the align
  // launch is saved.
  const int32_t* slot_experts = nullptr;  // [A], e.g. the token's top-k ids
  int expert_begin = 0;
  int local_experts = 0;
  bf16* act = nullptr;     // [A, I] scratch
  float* y_f32 = nullptr;  // [A, H] output per assignment, or
  bf16* y_bf16 = nullptr;  // [A, H] (exactly one of the two is set)
  int hidden = 0;          // H, a multiple of 8
  int inter = 0;           // I, a multiple of 8
  // The down kernel reads the routing and issues its first weight loads before pdl_wait(): moe_align wrote
  // the routing before gate_up (the down kernel's predecessor) passed its own wait (kernels/pdl.cuh), so
  // the down weights start loading during gate_up's tail. false: every read after the wait.
  bool down_loads_before_wait = true;
  // Staged down weights (kernels/staged_tile.cuh): each down block copies its 16 weight rows whole into
  // shared memory with cp.async before its PDL wait, instead of loading them into registers a few k blocks
  // at a time (down_loads_before_wait is for that register path). Taken where I is a multiple of 32 and the
  // tile fits staged_smem bytes.
  bool stage_down = false;
  // The staged down kernel loads its activation pieces (gate_up's output) into registers right after its
  // PDL wait, before waiting for its weight copies, where a block's tile has one token column (at most 8
  // assignments) and each warp at most kMoeDownActPiecesMax k blocks (I <= 1024): the activations' trip to
  // memory overlaps the copies' landing instead of following it, kUnroll k blocks at a time. The same
  // results.
  bool down_act_before_weights = false;  // runtime.moe_down_act_before_weights (default on)
  size_t staged_smem = 0;  // shared memory a staged block may use (the device's opt-in limit at most)
  // gate_up streams each block's 16 weight rows through shared memory in stages of gate_up_bulk_cols
  // columns, each row's piece one bulk copy on the SM's copy engine (kernels/bulk_copy.cuh), instead of
  // 16-byte register loads of every mma fragment. Taken where H is a multiple of 256; set only where
  // moe_gate_up_bulk_available.
  bool gate_up_bulk = false;
  int gate_up_bulk_stages = 2;  // stages in flight a block (2..kMoeGateUpBulkMaxStages)
  // 256 (9 KB a stage) or 512 (17 KB a stage, half as many copies of twice the length); 256 where H is not
  // a multiple of 512.
  int gate_up_bulk_cols = 256;
  // Block x's stages take the column pieces from piece x % (H / cols) on, wrapping around, instead of from
  // piece 0 (the sums' order differs, so not the same bits).
  bool gate_up_bulk_rotate = false;
  // Weight copies into shared memory under the L2 evict_first hint (kernels/device_common.cuh StreamHint;
  // runtime.weights_l2_evict_first); register loads stay plain.
  bool weights_evict_first = false;
};

constexpr int kMoeGateUpBulkMaxStages = 6;
constexpr int kMoeDownActPiecesMax = 8;

// Whether the bulk-copy gate_up runs here: an SM90+ device and its kernel compiled for SM90+.
bool moe_gate_up_bulk_available(int device_sm);

void launch_moe_experts(const MoeExpertsParams& p, cudaStream_t stream, const LaunchPolicy& policy);

}  // namespace tpserve::kernels
