// Host side of the phase marks (kernels/phase_trace.h): names, and the traced .cu files' buffers.
#include "kernels/phase_trace.h"

namespace tpserve::kernels {

#if defined(TPSERVE_PHASE_TRACE)
namespace phase_trace_detail {
template <TracedKernel K>
std::vector<PhaseMark> read();
template <TracedKernel K>
void clear();
// Defined by TPS_PHASE_TRACE_DEFINE in paged_attention_mma.cu, router_fused.cu and gemv_staged.cu.
template <>
std::vector<PhaseMark> read<TracedKernel::kDecodeAttention>();
template <>
std::vector<PhaseMark> read<TracedKernel::kRouterFused>();
template <>
std::vector<PhaseMark> read<TracedKernel::kGemvStaged>();
template <>
void clear<TracedKernel::kDecodeAttention>();
template <>
void clear<TracedKernel::kRouterFused>();
template <>
void clear<TracedKernel::kGemvStaged>();
}  // namespace phase_trace_detail
#endif

const char* traced_kernel_name(TracedKernel k) {
  switch (k) {
    case TracedKernel::kDecodeAttention:
      return "decode attention (tensor cores)";
    case TracedKernel::kRouterFused:
      return "fused router";
    case TracedKernel::kGemvStaged:
      return "staged GEMV";
  }
  return "?";
}

const std::vector<std::string>& phase_mark_names(TracedKernel k) {
  // Mark 0 is every kernel's entry, mark 2 the return of its PDL wait.
  static const std::vector<std::string> attention{"entry",
                                                  "step inputs read (before wait)",
                                                  "PDL wait returned",
                                                  "q rows in shared memory",
                                                  "q rows normalised + rotated",
                                                  "key tiles done",
                                                  "warps merged",
                                                  "end (no merge)",
                                                  "end (merged ranges)"};
  static const std::vector<std::string> router{"entry",
                                               "weight copies issued",
                                               "PDL wait returned",
                                               "v and sums of squares",
                                               "rows normalised",
                                               "logits tile",
                                               "first cluster barrier",
                                               "second cluster barrier",
                                               "end (block 0: gated)"};
  static const std::vector<std::string> gemv{
      "entry",         "weight copies issued", "PDL wait returned", "activations in place",
      "products done", "end (stored)"};
  switch (k) {
    case TracedKernel::kDecodeAttention:
      return attention;
    case TracedKernel::kRouterFused:
      return router;
    case TracedKernel::kGemvStaged:
      return gemv;
  }
  return gemv;
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
  using namespace phase_trace_detail;
  switch (k) {
    case TracedKernel::kDecodeAttention:
      return read<TracedKernel::kDecodeAttention>();
    case TracedKernel::kRouterFused:
      return read<TracedKernel::kRouterFused>();
    case TracedKernel::kGemvStaged:
      return read<TracedKernel::kGemvStaged>();
  }
#endif
  return {};
}

void clear_phase_traces() {
#if defined(TPSERVE_PHASE_TRACE)
  using namespace phase_trace_detail;
  clear<TracedKernel::kDecodeAttention>();
  clear<TracedKernel::kRouterFused>();
  clear<TracedKernel::kGemvStaged>();
#endif
}

}  // namespace tpserve::kernels
