// One-shot all-reduce over NVLink for small messages (decode activations): every rank copies its input into
// its own IPC-shared staging buffer, signals every peer, waits for every peer's signal, then sums all ranks'
// buffers (f32 accumulation, ranks in order 0..P-1, so every rank gets the same bits) into its data.
//
// Block b of every rank owns region b of each buffer half and the flags of block b; its call counter
// (one per block, in this rank's memory) numbers its calls, picks the half (counter parity) and is the
// value peers wait for. A block writes its region before it waits, which is safe: the region's half was
// last read two calls ago, and the previous call's barrier proved every peer had finished that one.
#pragma once

#include "kernels/kernel_api.h"

namespace tpserve::kernels {

inline constexpr int kOneShotMaxRanks = 8;
inline constexpr int kOneShotMaxBlocks = 64;
inline constexpr size_t kOneShotRegionBytes = size_t(16) << 10;                      // per block and half
inline constexpr size_t kOneShotMaxBytes = kOneShotMaxBlocks * kOneShotRegionBytes;  // 1 MiB per call
// Per rank: the staging buffer [2 halves][kOneShotMaxBlocks][kOneShotRegionBytes] ...
inline constexpr size_t kOneShotBufferBytes = 2 * kOneShotMaxBytes;
// ... the flags [kOneShotMaxBlocks][kOneShotMaxRanks] (peers write them) and the call counters
// [kOneShotMaxBlocks] (only this rank's blocks touch them), both uint32 and zeroed before first use.
inline constexpr size_t kOneShotFlagsBytes = kOneShotMaxBlocks * kOneShotMaxRanks * sizeof(uint32_t);
inline constexpr size_t kOneShotCountersBytes = kOneShotMaxBlocks * sizeof(uint32_t);

struct OneShotAllReduceParams {
  void* data = nullptr;                    // [count] this rank's input, then the sum (in place)
  void* buffers[kOneShotMaxRanks] = {};    // every rank's staging buffer, mapped here ([rank]: own)
  uint32_t* flags[kOneShotMaxRanks] = {};  // every rank's flags, mapped here
  uint32_t* counters = nullptr;            // this rank's call counters
  int64_t count = 0;                       // elements; count * element size <= kOneShotMaxBytes
  int rank = 0, ranks = 1;
  bool bf16 = true;  // element type: bf16, else f32
};

void launch_one_shot_all_reduce(const OneShotAllReduceParams& p, cudaStream_t stream,
                                const LaunchPolicy& policy);

// The sum of bf16 rows [T, H] (OneShotAllReduceParams::data, bf16, count = T * H) followed by the residual
// add and RMSNorm of kernels/rmsnorm.h, in one kernel: data = sum over ranks; residual += data (stored in
// bf16); out = w * r / sqrt(mean(r^2) + eps) of the stored residual. Same arithmetic as the one-shot
// all-reduce followed by launch_rmsnorm, and for H <= 2048 the same reduction order, so the bits match. Saves
// the RMSNorm launch and its re-read of the sum. Blocks own whole rows (at most kOneShotRegionBytes of them).
struct OneShotAddRmsNormParams {
  bf16* residual = nullptr;      // [T, H]
  const bf16* weight = nullptr;  // [H]
  bf16* out = nullptr;           // [T, H]
  int tokens = 0;                // T
  int hidden = 0;                // H, a multiple of 8, H * 2 <= kOneShotRegionBytes
  float eps = 1e-6f;
};

bool one_shot_add_rmsnorm_fits(int tokens, int hidden);
void launch_one_shot_all_reduce_add_rmsnorm(const OneShotAllReduceParams& p, const OneShotAddRmsNormParams& n,
                                            cudaStream_t stream, const LaunchPolicy& policy);

}  // namespace tpserve::kernels
