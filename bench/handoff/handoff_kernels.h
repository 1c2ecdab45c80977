// handoff's device side: a chain of dependent GEMV stages, x_{s+1} = W_s x_s, run several ways (HandoffArm)
// that differ only in how stage s + 1 learns that stage s is done and when it starts reading its weights.
// Every arm runs the same per-stage arithmetic (handoff_kernels.cu: each block's rows, each row summed by one
// warp in the same order), so all give the same bits; only the time differs. It is the benchmark's own kernel
// (not kernels/gemv_staged.cu) because it measures the handoff mechanism itself: the kernel arms launch one
// grid per stage (with and without the PDL attribute), the persistent arms one cooperative grid for all
// stages, which kernels/launch.h does not launch.
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <cstdint>

#include "kernels/kernel_api.h"

namespace tpserve::bench {

enum class HandoffArm : int {
  // A grid per stage, PDL: stage s + 1's blocks copy W_{s+1} to shared memory once every block of stage s has
  // passed its wait (they fit beside stage s's blocks), then wait for stage s's completion.
  kKernelsPdl,
  kKernels,  // a grid per stage, no attribute: stage s + 1 starts when stage s has completed
  // As kKernelsPdl with each block's shared memory padded so that one block fills an SM: stage s + 1's blocks
  // start only as stage s's leave (a kernel whose blocks take most of an SM, as the staged GEMVs do).
  kKernelsPdlAlone,
  // One grid: a block copies W_s after its own stage s - 1 arrival, then waits for the counter (less lead
  // than kKernelsPdl, whose copies start while stage s - 1 still computes).
  kPersistent,
  kPersistent2Buf,    // one grid; W_{s+1} copied into a second buffer while the block waits for and runs s
  kPersistentRelaxed  // as kPersistent, the counter polled by relaxed loads and one acquire fence after
};
inline constexpr int kNumHandoffArms = 6;
inline constexpr std::array<HandoffArm, kNumHandoffArms> kHandoffArms = {
    HandoffArm::kKernelsPdl, HandoffArm::kKernels,        HandoffArm::kKernelsPdlAlone,
    HandoffArm::kPersistent, HandoffArm::kPersistent2Buf, HandoffArm::kPersistentRelaxed};
// "kernels_pdl", "kernels", "kernels_pdl_alone", "persistent", "persistent_2buf", "persistent_relaxed"
const char* handoff_arm_name(HandoffArm arm);

struct HandoffChain {
  const kernels::bf16* weights = nullptr;  // [stages, hidden, hidden]: W_s row-major
  kernels::bf16* activations = nullptr;    // [stages + 1, hidden]: x_0 the input, x_{s+1} stage s's output
  unsigned int* counter = nullptr;         // persistent arms: block arrivals (zeroed before each launch)
  int stages = 0;
  int hidden = 0;          // a multiple of 8 and of rows_per_block
  int rows_per_block = 0;  // grid = hidden / rows_per_block blocks
  float scale = 1.0f;  // x_{s+1} = scale * W_s x_s (sqrt(3 / hidden) keeps uniform [-1, 1) weights' scale)
  // GPU tests only. skew: some blocks of each stage sleep about 2 us before storing their rows (widens the
  // window a broken handoff would read early in). skip_waits: the persistent grid never waits for the counter
  // (a broken handoff, the tests' negative control).
  bool skew = false;
  bool skip_waits = false;
  int sm_shared_bytes = 0;  // the device's shared memory per SM (cudaDevAttrMaxSharedMemoryPerMultiprocessor)
  int blocks() const { return hidden / rows_per_block; }
};

// Rows a block takes so that the grid fills `sms` multiprocessors once: hidden / sms rounded up to a
// divisor of hidden.
int handoff_rows_per_block(int hidden, int sms);
// Dynamic shared memory of one block of the arm: its weight rows (twice for kPersistent2Buf) and x;
// kKernelsPdlAlone's is padded to more than half of an SM's (HandoffChain::sm_shared_bytes).
size_t handoff_smem_bytes(const HandoffChain& c, HandoffArm arm);
// Throws tpserve::Error when the arm's grid cannot run on `device` (shared memory; for the persistent arms,
// all blocks resident at once). Sets each kernel's shared-memory limit to the largest any arm of `c` needs.
void check_handoff_fits(const HandoffChain& c, HandoffArm arm, int device);

// Enqueues the whole chain on `stream` as `arm` does it: the counter's memset, then one launch per stage or
// one persistent launch. Capturable into a graph. Checks every call.
void enqueue_handoff_chain(const HandoffChain& c, HandoffArm arm, cudaStream_t stream);

}  // namespace tpserve::bench
