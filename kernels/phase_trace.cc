// Host side of the phase marks (kernels/phase_trace.h): names, and the traced .cu files' buffers.
#include "kernels/phase_trace.h"

#include <iterator>

#if defined(TPSERVE_PHASE_TRACE)
#include <cuda_runtime_api.h>

#include "common/cuda_check.h"
#endif

namespace tpserve::kernels {

#if defined(TPSERVE_PHASE_TRACE)
namespace phase_trace_detail {
// Defined by TPS_PHASE_TRACE_DEFINE in the traced kernels' .cu files.
template <>
TraceAddresses trace_addresses<TracedKernel::kGemvStagedTriggerEarly>();
template <>
TraceAddresses trace_addresses<TracedKernel::kDecodeAttention>();
template <>
TraceAddresses trace_addresses<TracedKernel::kGemvStaged>();
template <>
TraceAddresses trace_addresses<TracedKernel::kRouterFused>();
template <>
TraceAddresses trace_addresses<TracedKernel::kMoeGateUpBulk>();
template <>
TraceAddresses trace_addresses<TracedKernel::kMoeDownStaged>();
template <>
TraceAddresses trace_addresses<TracedKernel::kRmsNorm>();
}  // namespace phase_trace_detail

namespace {

constexpr size_t kBufferBytes = sizeof(PhaseMark) * kPhaseTraceBlocks * kPhaseTraceMarks;

phase_trace_detail::TraceAddresses addresses_of(TracedKernel k) {
  using namespace phase_trace_detail;
  switch (k) {
    case TracedKernel::kGemvStagedTriggerEarly:
      return trace_addresses<TracedKernel::kGemvStagedTriggerEarly>();
    case TracedKernel::kDecodeAttention:
      return trace_addresses<TracedKernel::kDecodeAttention>();
    case TracedKernel::kGemvStaged:
      return trace_addresses<TracedKernel::kGemvStaged>();
    case TracedKernel::kRouterFused:
      return trace_addresses<TracedKernel::kRouterFused>();
    case TracedKernel::kMoeGateUpBulk:
      return trace_addresses<TracedKernel::kMoeGateUpBulk>();
    case TracedKernel::kMoeDownStaged:
      return trace_addresses<TracedKernel::kMoeDownStaged>();
    case TracedKernel::kRmsNorm:
      return trace_addresses<TracedKernel::kRmsNorm>();
  }
  return {};
}

}  // namespace
#endif

const TracedKernelNames& traced_kernel_names(TracedKernel k) {
  // Mark 0 is every kernel's entry, mark 2 the return of its PDL wait. Indexed by TracedKernel.
  static const std::vector<std::string> gemv_marks = {
      "entry",         "weight copies issued", "PDL wait returned", "activations in place",
      "products done", "end (stored)"};
  static const TracedKernelNames names[] = {
      {"staged GEMV, triggering before its wait (QKV)", gemv_marks},
      {"decode attention (tensor cores)",
       {"entry", "step inputs read (before wait)", "PDL wait returned", "q rows in shared memory",
        "q rows normalised + rotated", "key tiles done", "warps merged", "end (no merge)",
        "end (merged ranges)", "first K/V tile landed", "first tile's scores (warp 0)",
        "first tile's probabilities (warp 0)", "merge: warps' outputs stored", "merge: rows' max and sum"}},
      {"staged GEMV", gemv_marks},
      {"fused router",
       {"entry", "weight copies issued", "PDL wait returned", "v and sums of squares", "rows normalised",
        "logits tile", "first cluster barrier", "second cluster barrier (pushed logits: none)",
        "end (block 0: gated)", "norm weights landed, inv (thread 0)", "router rows landed (thread 0)",
        "block 0: logits stored, gating starts"}},
      {"MoE gate_up (bulk copies)",
       {"entry", "barriers set up", "PDL wait returned", "work item read", "first copies issued",
        "first stage landed", "stages done", "end (stored)"}},
      {"MoE down (staged)",
       {"entry", "weight copies issued", "PDL wait returned", "copies landed", "products done",
        "end (stored)"}},
      {"RMSNorm", {"entry", "weights read", "PDL wait returned", "rows summed", "block sum", "end (stored)"}},
  };
  static_assert(std::size(names) == std::size(kTracedKernels));
  return names[static_cast<int>(k)];
}

bool phase_trace_built() {
#if defined(TPSERVE_PHASE_TRACE)
  return true;
#else
  return false;
#endif
}

std::vector<PhaseMark> read_phase_trace([[maybe_unused]] TracedKernel k) {
#if defined(TPSERVE_PHASE_TRACE)
  std::vector<PhaseMark> out(kPhaseTraceBlocks * kPhaseTraceMarks);
  CUDA_CHECK(cudaDeviceSynchronize());
  CUDA_CHECK(cudaMemcpy(out.data(), addresses_of(k).marks, kBufferBytes, cudaMemcpyDeviceToHost));
  return out;
#else
  return {};
#endif
}

void clear_phase_traces() {
#if defined(TPSERVE_PHASE_TRACE)
  for (TracedKernel k : kTracedKernels) CUDA_CHECK(cudaMemset(addresses_of(k).marks, 0, kBufferBytes));
  CUDA_CHECK(cudaDeviceSynchronize());
#endif
}

void set_phase_trace_launches([[maybe_unused]] const std::function<int(TracedKernel)>& launch_of) {
#if defined(TPSERVE_PHASE_TRACE)
  CUDA_CHECK(cudaDeviceSynchronize());  // no launch of the previous step still counting
  for (TracedKernel k : kTracedKernels) {
    const int launch = launch_of(k);
    const PhaseTraceControl control{.launch = launch < 0 ? -1 : launch, .blocks_entered = 0};
    CUDA_CHECK(cudaMemcpy(addresses_of(k).control, &control, sizeof(control), cudaMemcpyHostToDevice));
  }
  CUDA_CHECK(cudaDeviceSynchronize());  // landed before the step's kernels (on the backend's own stream)
#endif
}

}  // namespace tpserve::kernels
