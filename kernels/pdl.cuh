// Device side of Programmatic Dependent Launch (PDL): the two calls an enrolled kernel makes.
//
// pdl_wait(): blocks until the grids this launch depends on have completed and their writes are visible.
// Every enrolled kernel calls it before its first read of anything a predecessor wrote (activations,
// routing, step inputs). Weights may be read before it: nothing in a step writes them.
// What may be read before pdl_wait(): weights, and anything written before the predecessor grid started
// (step inputs copied before the step's first kernel, e.g. the token's position that the O projection merging
// attention's ranges reads, kernels/attention_partials.cuh; positions MTP's draft steps advance in place,
// launches earlier; the MoE routing moe_align wrote before gate_up, when the down kernel runs). Every kernel
// waits before it triggers, so when this grid's blocks start, every grid before its predecessor has
// completed; only the predecessor's own output may not be there yet. One exception: a staged GEMV launched
// directly after an RMSNorm (no launch between them; up to 16 rows by default) triggers once its weight
// copies are issued, before its wait (GemvLaunchOptions::staged_trigger_before_wait,
// runtime.norm_next_gemv_trigger_early_max_rows), so its dependent may start while the norm still runs (every
// grid before the norm has completed). Such GEMVs are the QKV projection (its dependent decode attention
// reads step inputs, the K/V cache and norm weights before its wait; or qk_norm_rope_kv: slots, positions and
// norm weights), the unfused router and a dense MLP's gate_up (their dependents, top-k gating and silu_mul,
// wait first) and MTP's first fc (its dependent, the second fc, reads weights only): none reads before its
// wait what a norm writes, and no kernel writes before its wait.
//
// pdl_trigger(): lets the next launch in the stream start: its blocks become resident and run up to their
// own pdl_wait() (issuing their weight loads) while this grid still runs. tpserve's kernels call it right
// after pdl_wait() (pdl_wait_then_trigger(); decode attention after its key tiles instead under
// runtime.attention_trigger_after_keys; the staged GEMV above before it): dependents wait in pdl_wait() for
// this grid's completion and memory flush whatever the trigger's position, so an early trigger changes
// overlap, never results. What it requires: every block calls pdl_wait() before it exits (an early `return`
// included), or this grid could complete before its predecessor and a dependent read the predecessor's output
// too soon. (NCCL 2.28's symmetric-window kernels break the "dependents wait" half; tpserve registers no
// symmetric windows: the project's shared REFERENCE.md, "NCCL 2.28 and CUDA notes".)
//
// Both compile to nothing below SM90, where the host never sets the attribute for `auto` (kernels/policy.h);
// `on` on a device below SM90 is honoured by the host and is harmless there (no overlap, see DESIGN.md); `on`
// for code compiled below SM90 running on an SM90+ device is refused (it would not wait).
#pragma once

#include <cuda_runtime.h>

namespace tpserve::kernels {

__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cudaGridDependencySynchronize();
#endif
}

__device__ __forceinline__ void pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cudaTriggerProgrammaticLaunchCompletion();
#endif
}

// What every tpserve kernel calls before its first read of predecessor output (see pdl_trigger() above).
__device__ __forceinline__ void pdl_wait_then_trigger() {
  pdl_wait();
  pdl_trigger();
}

}  // namespace tpserve::kernels
