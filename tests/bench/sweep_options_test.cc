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

TEST(SweepOptions, ScriptedDraftKeysAreTpDecodesOwn) {
  const ArmSpec a = parse_arm("k2:bench.scripted_drafts=2,bench.draft_acceptance=0.7,runtime.max_batch=4");
  EXPECT_EQ(a.scripted_drafts, 2);
  EXPECT_DOUBLE_EQ(a.draft_acceptance, 0.7);
  EXPECT_EQ(a.overrides, (std::vector<std::string>{"runtime.max_batch=4"}));  // not passed to the config
  EXPECT_EQ(parse_arm("k1:bench.scripted_drafts=1").draft_acceptance, 1.0);
  for (const char* bad :
       {"x:bench.scripted_drafts=0", "x:bench.scripted_drafts=5", "x:bench.scripted_drafts=1.5",
        "x:bench.scripted_drafts=two", "x:bench.draft_acceptance=1.2", "x:bench.draft_acceptance=-0.1",
        "x:bench.nonsense=1"})
    EXPECT_THROW(parse_arm(bad), Error) << bad;
  SweepOptions o;
  o.config_path = "configs/tiny.yaml";
  o.arms = {parse_arm("x:bench.draft_acceptance=0.5")};  // a rate without drafts
  EXPECT_THROW(finalize_options(o), Error);
}

TEST(SweepOptions, SkipAllReduceIsTpDecodesOwn) {
  const ArmSpec a = parse_arm("nosum:bench.skip_all_reduce=1,parallel.tp=2");
  EXPECT_TRUE(a.skip_all_reduce);
  EXPECT_EQ(a.overrides, (std::vector<std::string>{"parallel.tp=2"}));
  EXPECT_FALSE(parse_arm("x:bench.skip_all_reduce=0").skip_all_reduce);
  EXPECT_FALSE(parse_arm("x").skip_all_reduce);
  for (const char* bad : {"x:bench.skip_all_reduce=2", "x:bench.skip_all_reduce=yes"})
    EXPECT_THROW(parse_arm(bad), Error) << bad;
}

TEST(SweepOptions, LogitProcessingKeysSetEveryRequestsProcessing) {
  const ArmSpec a = parse_arm(
      "pen:bench.presence_penalty=0.5,bench.frequency_penalty=-1,bench.repetition_penalty=1.1,"
      "bench.logit_bias_tokens=3,runtime.max_batch=4");
  EXPECT_FLOAT_EQ(a.processing.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(a.processing.frequency_penalty, -1.0f);
  EXPECT_FLOAT_EQ(a.processing.repetition_penalty, 1.1f);
  ASSERT_EQ(a.processing.logit_bias.size(), 3u);
  EXPECT_EQ(a.processing.logit_bias[2].first, 2);
  EXPECT_EQ(a.overrides, (std::vector<std::string>{"runtime.max_batch=4"}));
  EXPECT_FALSE(parse_arm("x").processing.any());
  for (const char* bad :
       {"x:bench.presence_penalty=3", "x:bench.repetition_penalty=0", "x:bench.logit_bias_tokens=1.5",
        "x:bench.logit_bias_tokens=1025", "x:bench.frequency_penalty=high"})
    EXPECT_THROW(parse_arm(bad), Error) << bad;
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
  SweepOptions prefix;
  prefix.config_path = "x";
  prefix.input_len = 16;
  prefix.shared_prefix_len = 16;
  EXPECT_NO_THROW(finalize_options(prefix));
  prefix.shared_prefix_len = 17;  // more than a prompt
  EXPECT_THROW(finalize_options(prefix), Error);
  prefix.shared_prefix_len = -1;
  EXPECT_THROW(finalize_options(prefix), Error);
  SweepOptions layer;
  layer.config_path = "x";
  layer.phase_trace_layer = 3;  // without --phase-trace
  EXPECT_THROW(finalize_options(layer), Error);
  layer.phase_trace = true;
  EXPECT_NO_THROW(finalize_options(layer));
  layer.phase_trace_layer = -2;
  EXPECT_THROW(finalize_options(layer), Error);
}

}  // namespace
}  // namespace tpserve::bench
