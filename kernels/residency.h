// How many blocks of a kernel an SM holds: alone (resident_blocks, the occupancy calculator's arithmetic),
// and beside blocks of the kernel before it (blocks_beside). Under PDL a kernel's blocks start while its
// predecessor's still run, and issue what does not depend on it (weight copies, step inputs) before their
// wait, but only on an SM with room for them beside the predecessor's blocks: registers (each of the SM's 4
// sub-partitions holds whole warps), shared memory, threads and block slots. Host arithmetic, no GPU needed;
// docs/step_latency.md ("Registers and shared memory decide which blocks start early") works the decode
// step's cases out.
#pragma once

#include <cstddef>

namespace tpserve::kernels {

// What one SM holds (cudaDeviceProp: regsPerMultiprocessor, sharedMemPerMultiprocessor,
// reservedSharedMemPerBlock, maxThreadsPerMultiProcessor, maxBlocksPerMultiProcessor; H100/H200 values).
struct SmLimits {
  int regs = 65536;
  size_t smem = 233472;
  size_t reserved_smem_per_block = 1024;
  int threads = 2048;
  int blocks = 32;
};
// Blocks of `threads` threads that one SM holds at once, by registers (allocated per warp in units of 256,
// each of the SM's 4 sub-partitions holding whole warps), shared memory (static + dynamic + the per-block
// reserve, in 128-byte units; the largest carveout) and threads: the occupancy calculator's arithmetic
// (cuda_occupancy.h), not the carveout the kernel last ran with.
int resident_blocks(const SmLimits& sm, int regs_per_thread, size_t static_smem, int threads,
                    size_t dynamic_smem);

// What one block of a kernel takes of an SM.
struct BlockFootprint {
  int regs_per_thread = 0;  // cudaFuncAttributes::numRegs
  size_t smem = 0;          // static + dynamic shared memory, bytes
  int threads = 0;
};

struct BesideFit {
  int blocks = 0;          // blocks of the incoming kernel an SM holds beside the resident ones
  const char* bound = "";  // what stops one more: "registers", "shared memory", "threads" or "block slots"
};

// Blocks of `incoming` one SM can hold beside `resident_blocks` blocks of `resident`. The resident blocks'
// warps are spread over the sub-partitions as evenly as they go, and each incoming warp takes the
// sub-partition with the most registers left (the best case: the hardware's placement is not documented).
// With resident_blocks = 0 this is resident_blocks(sm, incoming...).
BesideFit blocks_beside(const SmLimits& sm, const BlockFootprint& resident, int resident_blocks,
                        const BlockFootprint& incoming);

// A grid of `blocks` spread as evenly as it goes over `sms` SMs, at most `per_sm_limit` an SM (one wave: the
// rest wait for room): `sms_with_most` SMs hold `most` blocks, the others `fewest` (most - 1, or most where
// every SM holds the same). The block scheduler's placement is not documented; this is the even case.
struct EvenSpread {
  int most = 0, fewest = 0, sms_with_most = 0;
};
EvenSpread spread_evenly(int blocks, int sms, int per_sm_limit);

}  // namespace tpserve::kernels
