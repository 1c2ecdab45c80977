// Host side of the phase marks (kernels/phase_trace.h): names, and the traced .cu files' buffers.
#include "kernels/phase_trace.h"

namespace tpserve::kernels {

#if defined(TPSERVE_PHASE_TRACE)
namespace phase_trace_detail {
// Defined by TPS_PHASE_TRACE_DEFINE in the traced kernels' .cu files.
template <>
std::vector<PhaseMark> read<TracedKernel::kDecodeAttention>();
template <>
void clear<TracedKernel::kDecodeAttention>();
template <>
std::vector<PhaseMark> read<TracedKernel::kGemvStaged>();
template <>
void clear<TracedKernel::kGemvStaged>();
template <>
std::vector<PhaseMark> read<TracedKernel::kRouterFused>();
template <>
void clear<TracedKernel::kRouterFused>();
template <>
std::vector<PhaseMark> read<TracedKernel::kMoeGateUpBulk>();
template <>
void clear<TracedKernel::kMoeGateUpBulk>();
template <>
std::vector<PhaseMark> read<TracedKernel::kMoeDownStaged>();
template <>
void clear<TracedKernel::kMoeDownStaged>();
template <>
std::vector<PhaseMark> read<TracedKernel::kRmsNorm>();
template <>
void clear<TracedKernel::kRmsNorm>();
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
    case TracedKernel::kMoeGateUpBulk:
      return "MoE gate_up (bulk copies)";
    case TracedKernel::kMoeDownStaged:
      return "MoE down (staged)";
    case TracedKernel::kRmsNorm:
      return "RMSNorm";
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
                                                  "end (merged ranges)",
                                                  "first K/V tile landed",
                                                  "first tile's scores (warp 0)",
                                                  "first tile's probabilities (warp 0)"};
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
  static const std::vector<std::string> gate_up{"entry",          "barriers set up",     "PDL wait returned",
                                                "work item read", "first copies issued", "first stage landed",
                                                "stages done",    "end (stored)"};
  static const std::vector<std::string> down{"entry",         "weight copies issued", "PDL wait returned",
                                             "copies landed", "products done",        "end (stored)"};
  static const std::vector<std::string> norm{"entry",       "weights read", "PDL wait returned",
                                             "rows summed", "block sum",    "end (stored)"};
  switch (k) {
    case TracedKernel::kDecodeAttention:
      return attention;
    case TracedKernel::kRouterFused:
      return router;
    case TracedKernel::kGemvStaged:
      return gemv;
    case TracedKernel::kMoeGateUpBulk:
      return gate_up;
    case TracedKernel::kMoeDownStaged:
      return down;
    case TracedKernel::kRmsNorm:
      return norm;
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
    case TracedKernel::kMoeGateUpBulk:
      return read<TracedKernel::kMoeGateUpBulk>();
    case TracedKernel::kMoeDownStaged:
      return read<TracedKernel::kMoeDownStaged>();
    case TracedKernel::kRmsNorm:
      return read<TracedKernel::kRmsNorm>();
  }
#endif
  return {};
}

void clear_phase_traces() {
#if defined(TPSERVE_PHASE_TRACE)
  using namespace phase_trace_detail;
  clear<TracedKernel::kDecodeAttention>();
  clear<TracedKernel::kGemvStaged>();
  clear<TracedKernel::kRouterFused>();
  clear<TracedKernel::kMoeGateUpBulk>();
  clear<TracedKernel::kMoeDownStaged>();
  clear<TracedKernel::kRmsNorm>();
#endif
}

}  // namespace tpserve::kernels
