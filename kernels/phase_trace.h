// Phase marks inside kernels, for finding where a kernel's time goes in a real decode step (a diagnostic
// build only: cmake -DTPSERVE_PHASE_TRACE=ON; without it the marks compile to nothing and phase_trace_built()
// is false).
//
// Thread 0 of every block of a traced kernel records, at named points of its code, the GPU's global timer
// (%globaltimer, ns, common to all SMs) and its SM's cycle counter (clock64, for durations within a block).
// Each traced kernel has one buffer [kPhaseTraceBlocks][kPhaseTraceMarks] that every launch overwrites, so
// after a run it holds the last launch of that kernel (in a decode step: the last layer's), unless
// set_phase_trace_launches() chose another launch of the step to record (below); a mark a block
// did not reach in that launch keeps an older launch's time, which readers drop by taking only marks at or
// after the block's own entry mark (mark 0), and a block of an earlier launch with a larger grid by its grid
// size (bench/common/phase_summary.h).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace tpserve::kernels {

inline constexpr int kPhaseTraceBlocks = 1024;  // blocks recorded (linear block index)
inline constexpr int kPhaseTraceMarks = 14;     // marks a block
// Every traced kernel's mark 0 is its entry (bench/common/phase_summary.h relies on it) and mark 2 its
// return from the PDL wait.
inline constexpr int kPhaseMarkWaitReturned = 2;

// Which launch a traced kernel records: its blocks count themselves at their entry mark (mark 0, an atomic
// on blocks_entered), and block b of the step's launch b / grid blocks records where that is `launch`.
// launch -1: every launch records (the last one's marks remain), no counting. Either way thread 0 reads
// `launch` at the entry mark: one load more than the untraced kernel, before its PDL wait in every traced
// kernel.
struct PhaseTraceControl {
  int launch = -1;
  uint32_t blocks_entered = 0;
};

struct PhaseMark {
  uint64_t global_ns = 0;    // %globaltimer
  int64_t clock = 0;         // clock64 of the block's SM
  uint32_t grid_blocks = 0;  // the launch's blocks (tells launches of one kernel with other grids apart)
};

// The kernels that carry marks, in a decode step's layer order from the QKV projection on. The staged GEMV
// marks into one of two buffers: the launches that trigger their dependent before their own wait (after an
// RMSNorm: the QKV projection, runtime.norm_next_gemv_trigger_early_max_rows) and the others (the O
// projection, which a layer launches after the QKV projection).
enum class TracedKernel {
  kGemvStagedTriggerEarly,
  kDecodeAttention,
  kGemvStaged,
  kRouterFused,
  kMoeGateUpBulk,
  kMoeDownStaged,
  kRmsNorm
};
inline constexpr TracedKernel kTracedKernels[] = {TracedKernel::kGemvStagedTriggerEarly,
                                                  TracedKernel::kDecodeAttention,
                                                  TracedKernel::kGemvStaged,
                                                  TracedKernel::kRouterFused,
                                                  TracedKernel::kMoeGateUpBulk,
                                                  TracedKernel::kMoeDownStaged,
                                                  TracedKernel::kRmsNorm};
// What a report calls a traced kernel and each of its marks (index = mark).
struct TracedKernelNames {
  std::string kernel;
  std::vector<std::string> marks;
};
const TracedKernelNames& traced_kernel_names(TracedKernel k);

bool phase_trace_built();
// [kPhaseTraceBlocks * kPhaseTraceMarks] marks of the last launch of k (block-major), or empty without the
// build option. Synchronizes the device.
std::vector<PhaseMark> read_phase_trace(TracedKernel k);
// Zeroes every traced kernel's buffer (so that blocks a later launch does not reach read as absent).
void clear_phase_traces();
// Before a step: each traced kernel k records its launch launch_of(k) of the step (counted from 0; -1: every
// launch, the last one's marks remaining) and counts its launches from 0 again. The count is in blocks, so
// every launch of k in the step must have the same grid (a decode step's launches of each traced kernel do).
// Synchronizes.
void set_phase_trace_launches(const std::function<int(TracedKernel)>& launch_of);

namespace phase_trace_detail {
// The device addresses of a traced kernel's buffer and control, which its .cu file defines
// (TPS_PHASE_TRACE_DEFINE, kernels/phase_trace.cuh) and phase_trace.cc reads, clears and sets.
struct TraceAddresses {
  PhaseMark* marks = nullptr;
  PhaseTraceControl* control = nullptr;
};
template <TracedKernel K>
TraceAddresses trace_addresses();
}  // namespace phase_trace_detail

}  // namespace tpserve::kernels
