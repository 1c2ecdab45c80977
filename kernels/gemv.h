// Skinny matrix product for decode: out[M, N] = x[M, K] * w[N, K]^T with M <= kGemvMaxTokens, bf16 in,
// fp32 accumulation on tensor cores, bf16 or f32 out. Each weight byte is read once whatever M is, so the
// product runs at the memory-bandwidth floor where cuBLASLt's tiles (M padded to 64+) do not.
#pragma once

#include "kernels/attention_partials.h"
#include "kernels/kernel_api.h"

namespace tpserve::kernels {

inline constexpr int kGemvMaxTokens = 16;

struct GemvParams {
  const bf16* x = nullptr;   // [M, K] activations
  const bf16* w = nullptr;   // [N, K] weights ([out, in] as in checkpoints)
  bf16* out_bf16 = nullptr;  // [M, N], or
  float* out_f32 = nullptr;  // [M, N] (exactly one of the two is set)
  int m = 0;                 // M, 1..kGemvMaxTokens
  int n = 0;                 // N
  int k = 0;                 // K, a multiple of 8
  // M = 1, x attention's output of a one-token step left unmerged (AttentionPartials): where its context has
  // 2..x_partials.max_ranges ranges the activations are merged from the partials, else read from x. Taken
  // by the staged kernel with its activations in shared memory only (gemv_merges_attention_partials);
  // launch_gemv refuses it elsewhere.
  AttentionPartials x_partials;
};

// Staging (kernels/gemv_staged.cu): where all of a GEMV's weights fit in the shared memory of the SMs (each
// block at most `staged_smem` bytes, about one block an SM), every block copies all of its weight rows into
// shared memory with asynchronous copies issued before pdl_wait(). Under PDL the blocks start while their
// predecessor still runs, so the whole weight read overlaps it, not just the first loads. staged_sms = 0:
// never stage (the register-pipelined kernel); the caller also sets the launch policy's shared-memory
// carveout preference (launch.h), or an SM busy with a predecessor may not take a staged block early.
struct GemvLaunchOptions {
  int staged_sms = 0;          // SMs of the device; 0 = do not stage
  size_t staged_smem = 0;      // shared memory a staged block may use (at most the device's opt-in limit)
  int staged_copy_groups = 1;  // cp.async commit groups a warp's k range is cut into (1..4)
  // Where the activations do not fit in shared memory beside the weight rows (e.g. QKV 2048->5120 at 6-16
  // rows), the staged kernel reads them from global memory (L2) instead of declining the shape.
  bool staged_x_global = true;
  // The staged kernel's weight copies under the L2 evict_first hint (kernels/device_common.cuh StreamHint;
  // runtime.weights_l2_evict_first); the register kernel's loads stay plain.
  bool staged_weights_evict_first = false;
  // Blocks an SM may hold in one wave (1..4): row tiles are cut into up to staged_sms * this many blocks,
  // each of at most 32 / (blocks an SM then holds) warps, so that a block needs a fraction of an SM's shared
  // memory and can become resident, and start its copies, while the kernel before it still holds part of the
  // SM. Falls back to one block an SM where that many do not fit the SM's shared memory.
  int staged_blocks_per_sm = 1;
  // Warps a staged block may have (1..32; fewer k splits). A block of 32 warps at 48 registers a thread takes
  // 48 of each SM sub-partition's 64 register units, so it cannot become resident beside a decode attention
  // block (21 units) and starts only once that block has left; 28 warps fit beside one, 16 measured fastest.
  int staged_max_warps = 32;
  // Copy groups a warp keeps in flight before its PDL wait (0: all staged_copy_groups at once). With fewer,
  // each group goes out when an earlier one has landed: the weight stream queues fewer bytes ahead of the
  // predecessor kernel's own memory operations (docs/step_latency.md, "Phase marks").
  int staged_groups_in_flight = 0;
  // The staged kernel triggers its dependent launch (PDL) once its weight copies are issued, before its own
  // wait, rather than right after the wait (the rule every other kernel keeps): the dependent's blocks may
  // then start while this kernel's predecessor still runs, so the caller sets it only where the dependent
  // reads nothing before its wait that the predecessor writes (kernels/pdl.cuh). The same results.
  bool staged_trigger_before_wait = false;
};

// Whether launch_gemv(p, ...) with these options can take p.x_partials (M = 1, the staged kernel with its
// activations in shared memory).
bool gemv_merges_attention_partials(const GemvParams& p, const GemvLaunchOptions& options);

// The staged kernel where options allow it and the shape suits it (true), else the register kernel (false).
bool launch_gemv(const GemvParams& p, cudaStream_t stream, const LaunchPolicy& policy,
                 const GemvLaunchOptions& options = {});

// How the staged kernel cuts `p` (host arithmetic, no GPU needed): blocks of tiles_per_block 16-row tiles,
// each tile's K split over k_splits warps, `smem` bytes of dynamic shared memory a block, the activations at
// x_offset in it when x_shared (else read from global memory).
struct GemvStagedPlan {
  int tiles_per_block = 0, k_splits = 0, blocks = 0;
  size_t x_offset = 0, smem = 0;
  bool x_shared = true;
  int warps() const { return tiles_per_block * k_splits; }
};
// The plan for `p` under `options` (staged_blocks_per_sm blocks an SM where they fit, else one); false where
// the staged kernel does not take the shape: K not a multiple of 32, M outside 1..kGemvMaxTokens, staging off
// (staged_sms < 1), more row tiles a block than warps allowed, or the weight rows (and, without
// staged_x_global, the activations) beyond staged_smem.
bool plan_gemv_staged(const GemvParams& p, const GemvLaunchOptions& options, GemvStagedPlan& plan);

// The staged kernel (see GemvLaunchOptions) for `p`. Launches nothing and returns false where the shape does
// not suit it (plan_gemv_staged), or p.x_partials is set and the plan cannot merge them
// (gemv_merges_attention_partials).
bool launch_gemv_staged(const GemvParams& p, const GemvLaunchOptions& options, cudaStream_t stream,
                        const LaunchPolicy& policy);

}  // namespace tpserve::kernels
