// Launch policy: whether a kernel launch at a named site carries Programmatic Dependent Launch (PDL).
//
// Pure host logic (no CUDA headers), so that it builds and is unit-tested everywhere; kernels/launch.h asks
// it once per (device, kernel) and caches the answer per device. The rule, from shared/DESIGN.md:
//   - the environment kill-switch TPSERVE_PDL=off turns PDL off everywhere, whatever the config says;
//   - a site's mode is launch.pdl.sites.<name>, else launch.pdl.default;
//   - auto = on iff the device is SM90+ AND the kernel's compiled code targets SM90+;
//   - on = honoured even below SM90 (an experiment users run), with a warning: there the attribute does
//     nothing for eager launches but graph capture records a programmatic edge that costs ~0.6-1.1 us a
//     replay;
//   - a kernel that is not safely enrolled (no pdl_wait before its first dependent read) never gets it.
#pragma once

#include <array>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace tpserve::kernels {

enum class PdlMode { kAuto, kOn, kOff };

std::optional<PdlMode> parse_pdl_mode(std::string_view name);
const char* pdl_mode_name(PdlMode mode);

// Named launch sites. The string names are stable: configs, logs and reports use them.
enum class Site : int {
  kEmbedding,
  kRmsNorm,
  kAddRmsNorm,
  kQkNormRopeKv,
  kGemv,
  kDecodeAttention,
  kPrefillAttention,
  kTopkGating,
  kMoeAlign,
  kMoeExperts,
  kMoeCombine,
  kSiluMul,
  kSampling,
  kAllReduce,
  kMtpVerify,
  kAdd,
  kGatherRows,
  kMoePack,
  kWeightFill,  // synthetic weights generated on the device at load (not part of a step)
  kCount
};
inline constexpr int kNumSites = static_cast<int>(Site::kCount);

const char* site_name(Site site);
std::optional<Site> site_from_name(std::string_view name);
std::span<const std::string_view> site_names();

struct PdlSettings {
  PdlMode default_mode = PdlMode::kAuto;
  std::array<std::optional<PdlMode>, kNumSites> sites{};  // per-site override
  bool kill_switch = false;                               // TPSERVE_PDL=off
};

// Reads TPSERVE_PDL (off|0|false => kill switch). Unknown values throw tpserve::Error.
bool pdl_kill_switch_from_env();

struct PdlDecision {
  bool enabled = false;
  // The caller logs the reason: `on` below SM90 (honoured, but costly), or `on` refused for a kernel
  // compiled below SM90 on an SM90+ device (it would not wait).
  bool warn = false;
  std::string reason;
};

// device_sm and kernel_sm are compute capabilities as major*10+minor (90 = SM90). kernel_sm is the
// architecture the kernel's code was compiled for (cudaFuncAttributes::ptxVersion/binaryVersion).
PdlDecision decide_pdl(Site site, const PdlSettings& settings, int device_sm, int kernel_sm,
                       bool kernel_pdl_safe);

}  // namespace tpserve::kernels
