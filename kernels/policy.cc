#include "kernels/policy.h"

#include <cstdlib>

#include "common/error.h"

namespace tpserve::kernels {
namespace {
constexpr std::array<std::string_view, kNumSites> kSiteNames = {
    "embedding",   "rmsnorm",          "add_rmsnorm",       "qk_norm_rope_kv",
    "gemv",        "decode_attention", "prefill_attention", "topk_gating",
    "moe_align",   "moe_experts",      "moe_combine",       "silu_mul",
    "sampling",    "all_reduce",       "mtp_verify",        "add",
    "gather_rows", "moe_pack",         "weight_fill",
};
}  // namespace

std::optional<PdlMode> parse_pdl_mode(std::string_view name) {
  if (name == "auto") return PdlMode::kAuto;
  if (name == "on") return PdlMode::kOn;
  if (name == "off") return PdlMode::kOff;
  return std::nullopt;
}

const char* pdl_mode_name(PdlMode mode) {
  switch (mode) {
    case PdlMode::kAuto:
      return "auto";
    case PdlMode::kOn:
      return "on";
    case PdlMode::kOff:
      return "off";
  }
  return "?";
}

const char* site_name(Site site) {
  const int i = static_cast<int>(site);
  TPS_CHECK(i >= 0 && i < kNumSites, "bad site index ", i);
  return kSiteNames[i].data();
}

std::optional<Site> site_from_name(std::string_view name) {
  for (int i = 0; i < kNumSites; ++i)
    if (kSiteNames[i] == name) return static_cast<Site>(i);
  return std::nullopt;
}

std::span<const std::string_view> site_names() {
  return kSiteNames;
}

bool pdl_kill_switch_from_env() {
  const char* env = std::getenv("TPSERVE_PDL");
  if (env == nullptr || *env == '\0') return false;
  const std::string_view v(env);
  if (v == "off" || v == "0" || v == "false") return true;
  if (v == "auto" || v == "1" || v == "true" || v == "on") return false;
  TPS_THROW("TPSERVE_PDL='", v,
            "' is not one of off|0|false (kill switch) or auto|on|1|true (config decides)");
}

PdlDecision decide_pdl(Site site, const PdlSettings& settings, int device_sm, int kernel_sm,
                       bool kernel_pdl_safe) {
  const int i = static_cast<int>(site);
  const PdlMode mode = settings.sites[i].value_or(settings.default_mode);
  const std::string from =
      settings.sites[i] ? std::string("launch.pdl.sites.") + site_name(site) : "launch.pdl.default";
  const std::string mode_text = from + "=" + pdl_mode_name(mode);
  if (settings.kill_switch) return {false, false, "TPSERVE_PDL=off (kill switch)"};
  if (!kernel_pdl_safe) return {false, false, "kernel not enrolled for PDL (marked unsafe)"};
  switch (mode) {
    case PdlMode::kOff:
      return {false, false, mode_text};
    case PdlMode::kOn:
      // An SM90+ device honours the edge, but code compiled below SM90 has no griddepcontrol.wait (it
      // compiles to nothing, kernels/pdl.cuh): the dependent would read its predecessor's output unflushed.
      if (device_sm >= 90 && kernel_sm < 90)
        return {false, true,
                mode_text + " refused: the kernel's code is for sm_" + std::to_string(kernel_sm) +
                    " (no PDL wait in it), and device sm_" + std::to_string(device_sm) +
                    " would start its dependents early; build for sm_90 to use PDL"};
      if (device_sm < 90)
        return {true, true,
                mode_text + " honoured below SM90 (device sm_" + std::to_string(device_sm) + ", kernel sm_" +
                    std::to_string(kernel_sm) +
                    "): no overlap, but each captured edge costs ~0.6-1.1 us per graph replay"};
      return {true, false, mode_text};
    case PdlMode::kAuto:
      if (device_sm < 90)
        return {false, false, mode_text + ": device sm_" + std::to_string(device_sm) + " < sm_90"};
      if (kernel_sm < 90)
        return {false, false,
                mode_text + ": kernel compiled for sm_" + std::to_string(kernel_sm) + " < sm_90"};
      return {true, false, mode_text + ": device and kernel are sm_90+"};
  }
  return {false, false, "unreachable"};
}

}  // namespace tpserve::kernels
