// Stages inside one resident grid (a persistent kernel, docs/step_latency.md "Design 2"): every block of
// the grid finishes stage s before any block reads what stage s wrote, through one arrival counter in
// global memory instead of a kernel boundary. The counter counts block arrivals over the whole launch
// (stage s is complete once it reaches (s + 1) x blocks), so no stage resets it; the launch's predecessor
// (a memset in the same graph) zeroes it.
//
// Ordering: a block's threads store their stage's outputs, meet at a block barrier, and one thread adds its
// arrival with a release reduction at GPU scope (cumulative: it publishes what the barrier ordered before
// it; no fence and no returned value to wait for); a waiting block's one thread spins on
// acquire loads of the counter, then the block meets at a barrier, after which every thread may read the
// stage's outputs. Read them through L2 (ld.global.cg, __ldcg), never the non-coherent texture path.
//
// Every block of the grid must be resident at once (a cooperative launch checks it), or a waiting block can
// hold the SM a block it waits for needs.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace tpserve::kernels {

// The block's arrival after its stores of the stage. Called by every thread of the block.
__device__ __forceinline__ void grid_stage_arrive(unsigned int* counter) {
  __syncthreads();
  if (threadIdx.x == 0) asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(counter) : "memory");
}

// Returns once `counter` has reached `target` (all blocks' arrivals of the stages waited for). Called by
// every thread of the block. relaxed_poll: the spin reads the counter relaxed and one acquire fence follows
// the read that saw the target (the PTX memory model's fence form of the acquire pattern); else every read
// of the spin is an acquire load. The same guarantee; bench/handoff measures both.
__device__ __forceinline__ void grid_stage_wait(const unsigned int* counter, unsigned int target,
                                                bool relaxed_poll = false) {
  if (threadIdx.x == 0) {
    unsigned int seen = 0;
    if (relaxed_poll) {
      do {
        asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(seen) : "l"(counter) : "memory");
      } while (seen < target);
      asm volatile("fence.acq_rel.gpu;" ::: "memory");
    } else {
      do {
        asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(seen) : "l"(counter) : "memory");
      } while (seen < target);
    }
  }
  __syncthreads();
}

}  // namespace tpserve::kernels
