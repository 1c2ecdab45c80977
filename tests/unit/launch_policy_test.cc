// The PDL policy table for simulated architectures x config x environment (no GPU needed).
#include <gtest/gtest.h>

#include <cstdlib>

#include "common/error.h"
#include "kernels/policy.h"

namespace tpserve::kernels {
namespace {

struct Case {
  int device_sm;
  int kernel_sm;
  PdlMode mode;
  bool kill;
  bool safe;
  bool enabled;
  bool warn;
};

TEST(LaunchPolicy, TableOverArchitecturesModesAndKillSwitch) {
  const int archs[] = {75, 80, 86, 89, 90, 100};
  int checked = 0;
  for (int sm : archs) {
    for (PdlMode mode : {PdlMode::kAuto, PdlMode::kOn, PdlMode::kOff}) {
      for (bool kill : {false, true}) {
        for (bool safe : {true, false}) {
          PdlSettings s;
          s.default_mode = mode;
          s.kill_switch = kill;
          // Kernel compiled for the device's own architecture (what a fat binary gives).
          const PdlDecision d = decide_pdl(Site::kTopkGating, s, sm, sm, safe);
          bool want = false, warn = false;
          if (!kill && safe) {
            if (mode == PdlMode::kOn) want = true, warn = sm < 90;
            if (mode == PdlMode::kAuto) want = sm >= 90;
          }
          EXPECT_EQ(d.enabled, want) << "sm " << sm << " mode " << pdl_mode_name(mode) << " kill " << kill
                                     << " safe " << safe << ": " << d.reason;
          EXPECT_EQ(d.warn, warn) << d.reason;
          EXPECT_FALSE(d.reason.empty());
          ++checked;
        }
      }
    }
  }
  EXPECT_EQ(checked, 6 * 3 * 2 * 2);
}

TEST(LaunchPolicy, AutoNeedsKernelCompiledForSm90) {
  PdlSettings s;
  const PdlDecision d = decide_pdl(Site::kGemv, s, 90, 80, true);  // PTX for sm_80 JIT-ed on an H100
  EXPECT_FALSE(d.enabled);
  EXPECT_NE(d.reason.find("kernel compiled for sm_80"), std::string::npos) << d.reason;
  EXPECT_TRUE(decide_pdl(Site::kGemv, s, 100, 90, true).enabled);
  // `on` does not force it there either: the sm_80 code has no wait, and the H100 would start the
  // dependent early (refused with a warning). On an sm_80 device it is honoured (no overlap there).
  s.default_mode = PdlMode::kOn;
  const PdlDecision on = decide_pdl(Site::kGemv, s, 90, 80, true);
  EXPECT_FALSE(on.enabled);
  EXPECT_TRUE(on.warn);
  EXPECT_NE(on.reason.find("refused"), std::string::npos) << on.reason;
  EXPECT_TRUE(decide_pdl(Site::kGemv, s, 80, 80, true).enabled);
}

TEST(LaunchPolicy, SiteOverrideBeatsDefault) {
  PdlSettings s;
  s.default_mode = PdlMode::kOff;
  s.sites[static_cast<int>(Site::kSampling)] = PdlMode::kAuto;
  EXPECT_TRUE(decide_pdl(Site::kSampling, s, 90, 90, true).enabled);
  EXPECT_FALSE(decide_pdl(Site::kTopkGating, s, 90, 90, true).enabled);
  EXPECT_NE(decide_pdl(Site::kSampling, s, 90, 90, true).reason.find("launch.pdl.sites.sampling"),
            std::string::npos);
}

TEST(LaunchPolicy, SiteNamesRoundTripAndAreUnique) {
  for (int i = 0; i < kNumSites; ++i) {
    const Site site = static_cast<Site>(i);
    EXPECT_EQ(site_from_name(site_name(site)), site);
  }
  EXPECT_FALSE(site_from_name("topk").has_value());
}

TEST(LaunchPolicy, KillSwitchFromEnvironment) {
  setenv("TPSERVE_PDL", "off", 1);
  EXPECT_TRUE(pdl_kill_switch_from_env());
  setenv("TPSERVE_PDL", "auto", 1);
  EXPECT_FALSE(pdl_kill_switch_from_env());
  setenv("TPSERVE_PDL", "maybe", 1);
  EXPECT_THROW(pdl_kill_switch_from_env(), Error);
  unsetenv("TPSERVE_PDL");
  EXPECT_FALSE(pdl_kill_switch_from_env());
}

}  // namespace
}  // namespace tpserve::kernels
