// tp_decode's flag parsers: concurrency lists, arms with overrides (commas inside brackets kept), checks.
#include <gtest/gtest.h>

#include "bench/tp_decode/sweep_options.h"
#include "common/error.h"

namespace tpserve::bench {
namespace {

TEST(SweepOptions, ConcurrencyList) {
  EXPECT_EQ(parse_concurrency_list("1,2,4, 8"), (std::vector<int>{1, 2, 4, 8}));
  EXPECT_THROW(parse_concurrency_list("1,,2"), Error);
  EXPECT_THROW(parse_concurrency_list("0"), Error);
  EXPECT_THROW(parse_concurrency_list("2,x"), Error);
  EXPECT_THROW(parse_concurrency_list("4,4"), Error);
}

TEST(SweepOptions, Arms) {
  const ArmSpec a = parse_arm("pdl_off:launch.pdl.default=off,cuda_graph.capture_sizes=[1,2,4]");
  EXPECT_EQ(a.name, "pdl_off");
  EXPECT_EQ(a.overrides,
            (std::vector<std::string>{"launch.pdl.default=off", "cuda_graph.capture_sizes=[1,2,4]"}));
  EXPECT_TRUE(parse_arm("base").overrides.empty());
  EXPECT_TRUE(parse_arm("base:").overrides.empty());
  EXPECT_THROW(parse_arm(":a=b"), Error);
  EXPECT_THROW(parse_arm("x:novalue"), Error);
  EXPECT_THROW(parse_arm("bad name:a=b"), Error);
}

TEST(SweepOptions, FinalizeAddsTheDefaultArmAndRejectsDuplicates) {
  SweepOptions o;
  o.config_path = "configs/tiny.yaml";
  finalize_options(o);
  ASSERT_EQ(o.arms.size(), 1u);
  EXPECT_EQ(o.arms[0].name, "base");
  o.arms = {{"a", {}}, {"a", {}}};
  EXPECT_THROW(finalize_options(o), Error);
  SweepOptions bad;
  bad.config_path = "x";
  bad.rounds = 0;
  EXPECT_THROW(finalize_options(bad), Error);
}

}  // namespace
}  // namespace tpserve::bench
