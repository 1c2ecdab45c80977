// Skinny matrix product for decode: out[M, N] = x[M, K] * w[N, K]^T with M <= kGemvMaxTokens, bf16 in,
// fp32 accumulation on tensor cores, bf16 or f32 out. Each weight byte is read once whatever M is, so the
// product runs at the memory-bandwidth floor where cuBLASLt's tiles (M padded to 64+) do not.
#pragma once

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
};

// Staging (kernels/gemv_staged.cu): where all of a GEMV's weights fit in the shared memory of the SMs (each
// block at most `staged_smem` bytes, about one block an SM), every block copies all of its weight rows into
// shared memory with asynchronous copies issued before pdl_wait(). Under PDL the blocks start while their
// predecessor still runs, so the whole weight read overlaps it, not just the first loads. staged_sms = 0:
// never stage (the register-pipelined kernel); the caller also sets the launch policy's shared-memory
// carveout preference (launch.h), or an SM busy with a predecessor may not take a staged block early.
struct GemvLaunchOptions {
  int staged_sms = 0;      // SMs of the device; 0 = do not stage
  size_t staged_smem = 0;  // shared memory a staged block may use (at most the device's opt-in limit)
};

void launch_gemv(const GemvParams& p, cudaStream_t stream, const LaunchPolicy& policy,
                 const GemvLaunchOptions& options = {});

// The GEMV with its activations computed in the kernel: x = rmsnorm(residual [+ add]) * norm_weight, with
// kernels/rmsnorm.h's arithmetic, rounded to bf16 (GemvParams::x is unused). Every block normalises the M
// rows into shared memory (after issuing its first weight loads, whose latency hides the norm) and writes
// its share of `normed`; with `add`, the last block to have read the inputs (an arrival counter it resets)
// writes the new residual, so that no block reads a residual another has already updated. One launch instead
// of rmsnorm + GEMV.
struct GemvNormParams {
  bf16* residual = nullptr;           // [M, K] the norm's input; with add: residual += add (stored in bf16)
  const bf16* add = nullptr;          // [M, K] or nullptr (plain RMSNorm of residual)
  const bf16* norm_weight = nullptr;  // [K]
  bf16* normed = nullptr;             // [M, K] out: the activations (for later consumers); not aliasing above
  float eps = 1e-6f;
  int32_t* arrivals = nullptr;  // one counter, zeroed once and left zero by every launch (used with add)
};

// Whether M rows of K suit the kernel: M <= 8 (one token tile) and the rows within its shared memory.
bool gemv_norm_fits(int m, int k);
void launch_gemv_norm(const GemvParams& p, const GemvNormParams& norm, cudaStream_t stream,
                      const LaunchPolicy& policy, const GemvLaunchOptions& options = {});

// The staged kernel (see GemvLaunchOptions) for `p`, with its activations computed as launch_gemv_norm's
// where norm != nullptr. Launches nothing and returns false where the shape does not suit it (K not a
// multiple of 32, or the weight rows and activations beyond staged_smem).
bool launch_gemv_staged(const GemvParams& p, const GemvNormParams* norm, const GemvLaunchOptions& options,
                        cudaStream_t stream, const LaunchPolicy& policy);

}  // namespace tpserve::kernels
