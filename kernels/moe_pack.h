// Expert-parallel dispatch, sending side: each (token, slot) goes to the rank owning its expert, in
// (token, slot) order within each rank's fixed-capacity block of the send buffer (backend.h: moe_pack).
#pragma once

#include "kernels/kernel_api.h"

namespace tpserve::kernels {

inline constexpr int kMoePackMaxPeers = 1024;

struct MoePackParams {
  const bf16* x = nullptr;            // [T, H]
  const int32_t* topk_ids = nullptr;  // [T, k] global expert ids
  bf16* send_x = nullptr;             // [P, cap, H] row n of block p: the n-th (token, slot) sent to p
  int32_t* send_expert = nullptr;     // [P, cap] the owner's local expert id of each row, -1 if unused
  int32_t* origin = nullptr;          // [T, k] p * cap + n (-1 if the expert has no owner or p overflows)
  int tokens = 0;                     // T
  int k = 0;
  int hidden = 0;  // H, a multiple of 8
  int experts_per_rank = 0;
  int peers = 0;     // P <= kMoePackMaxPeers
  int capacity = 0;  // cap
};

void launch_moe_pack(const MoePackParams& p, cudaStream_t stream, const LaunchPolicy& policy);

}  // namespace tpserve::kernels
