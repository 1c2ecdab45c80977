// op_chain's host logic: --shapes and --tokens parsing, option checks, device bytes per shape, the per-edge
// arithmetic of the summaries (paired by round against the baseline mode), and the table and JSON.
#include <gtest/gtest.h>

#include <cmath>

#include "bench/op_chain/chain_options.h"
#include "bench/op_chain/chain_report.h"
#include "bench/op_chain/chain_summary.h"
#include "common/error.h"

namespace tpserve::bench {
namespace {

TEST(OpChainOptions, ShapeList) {
  const auto shapes = parse_chain_shapes("64x8x2048x16, 512x10x2560x48");
  ASSERT_EQ(shapes.size(), 2u);
  EXPECT_EQ(shapes[0], (ChainShape{64, 8, 2048, 16}));
  EXPECT_EQ(shapes[1], (ChainShape{512, 10, 2560, 48}));
  EXPECT_EQ(shapes[1].name(), "512x10x2560x48");
  EXPECT_THROW(parse_chain_shapes("64x8x2048"), Error);                  // three fields
  EXPECT_THROW(parse_chain_shapes("64x8x2048x16x1"), Error);             // five
  EXPECT_THROW(parse_chain_shapes("1024x8x2048x16"), Error);             // more experts than gating takes
  EXPECT_THROW(parse_chain_shapes("8x9x2048x16"), Error);                // k > E
  EXPECT_THROW(parse_chain_shapes("64x17x2048x16"), Error);              // k > 16
  EXPECT_THROW(parse_chain_shapes("64x8x2044x16"), Error);               // H not a multiple of 8
  EXPECT_THROW(parse_chain_shapes("64x8x2048x0"), Error);                // no layers
  EXPECT_THROW(parse_chain_shapes("64x8x2048x16,"), Error);              // empty item
  EXPECT_THROW(parse_chain_shapes("64x8x2048x16a"), Error);              // trailing garbage
  EXPECT_THROW(parse_chain_shapes("64x8x2048x16,64x8x2048x16"), Error);  // twice
}

TEST(OpChainOptions, TokenList) {
  EXPECT_EQ(parse_token_counts("1,16, 48"), (std::vector<int>{1, 16, 48}));
  EXPECT_THROW(parse_token_counts("0"), Error);
  EXPECT_THROW(parse_token_counts("4097"), Error);
  EXPECT_THROW(parse_token_counts("1,,2"), Error);
  EXPECT_THROW(parse_token_counts("2,x"), Error);
  EXPECT_THROW(parse_token_counts("4,4"), Error);
}

TEST(OpChainOptions, DefaultsAreTheIssueShapesAndChecksHold) {
  ChainOptions o;
  ASSERT_EQ(o.shapes.size(), 3u);
  EXPECT_EQ(o.shapes[2], (ChainShape{512, 10, 2560, 48}));
  EXPECT_EQ(o.tokens, (std::vector<int>{1, 16, 48}));
  EXPECT_EQ(o.rounds, 6);
  EXPECT_NO_THROW(check_chain_options(o));
  o.rounds = 0;
  EXPECT_THROW(check_chain_options(o), Error);
  o.rounds = 2, o.replays = 0;
  EXPECT_THROW(check_chain_options(o), Error);
  o.replays = 1, o.tokens.clear();
  EXPECT_THROW(check_chain_options(o), Error);
}

TEST(OpChainOptions, ModeNamesAndDeviceBytes) {
  EXPECT_STREQ(mode_name(LaunchMode::kChevron), "chevron");
  EXPECT_STREQ(mode_name(LaunchMode::kEx), "ex");
  EXPECT_STREQ(mode_name(LaunchMode::kExPdl), "ex_pdl");
  EXPECT_STREQ(mode_label(LaunchMode::kChevron), "<<<>>>");
  // 1 layer, 1 token, E 2, k 1, H 8: weights 2 * 2*8*2, logits 2*4, gating 8, states 2 * 8*2, slack 7 * 512.
  EXPECT_EQ(chain_device_bytes({2, 1, 8, 1}, 1), 64u + 8u + 8u + 32u + 7u * 512u);
  EXPECT_GT(chain_device_bytes({512, 10, 2560, 48}, 48), 48ull * 2 * 512 * 2560 * 2);
}

// A case whose modes take the given microseconds per replay in each round (eager: twice that), with the
// given programmatic edge counts.
CaseRun fake_case(const std::array<std::vector<double>, kNumLaunchModes>& replay_us,
                  const std::array<int, kNumLaunchModes>& edges) {
  CaseRun run;
  run.shape = {64, 8, 2048, 16};
  run.tokens = 1;
  run.router_gemm = "gemv";
  run.outputs_match = true;
  for (int m = 0; m < kNumLaunchModes; ++m) {
    run.modes[m].replay_us = replay_us[m];
    for (double v : replay_us[m]) run.modes[m].eager_us.push_back(2 * v);
    run.modes[m].graph.kernel_nodes = 48;
    run.modes[m].graph.programmatic_edges = edges[m];
  }
  return run;
}

TEST(OpChainSummary, PerEdgeIsThePairedDifferenceOverTheExtraEdges) {
  EXPECT_DOUBLE_EQ(us_per_edge(-8.0, 16), -0.5);
  EXPECT_TRUE(std::isnan(us_per_edge(3.0, 0)));
  EXPECT_TRUE(std::isnan(us_per_edge(std::nan(""), 16)));

  // chevron = ex + 1 us, same edges; ex_pdl saves 8, 8, 16, 8 us over 16 extra edges (median 8).
  const CaseRun run =
      fake_case({std::vector<double>{101, 111, 121, 131}, std::vector<double>{100, 110, 120, 130},
                 std::vector<double>{92, 102, 104, 122}},
                {31, 31, 47});
  const auto s = summarize_case(run);
  const ModeSummary& chevron = s[static_cast<int>(LaunchMode::kChevron)];
  const ModeSummary& ex = s[static_cast<int>(LaunchMode::kEx)];
  const ModeSummary& pdl = s[static_cast<int>(LaunchMode::kExPdl)];
  EXPECT_EQ(chevron.extra_edges, 0);
  EXPECT_DOUBLE_EQ(chevron.replay_vs_base.median, 1.0);
  EXPECT_EQ(chevron.replay_vs_base.sign_held, 4);
  EXPECT_TRUE(std::isnan(chevron.replay_us_per_edge));
  EXPECT_DOUBLE_EQ(ex.replay_vs_base.median, 0.0);
  EXPECT_EQ(pdl.extra_edges, 16);
  EXPECT_DOUBLE_EQ(pdl.replay_vs_base.median, -8.0);
  EXPECT_DOUBLE_EQ(pdl.replay_us_per_edge, -0.5);
  EXPECT_DOUBLE_EQ(pdl.eager_us_per_edge, -1.0);
  EXPECT_EQ(pdl.programmatic_edges, 47);
  EXPECT_DOUBLE_EQ(pdl.replay.median, 103.0);
}

TEST(OpChainReport, TableAndJson) {
  std::vector<CaseRun> runs = {
      fake_case({std::vector<double>{101, 111}, std::vector<double>{100, 110}, std::vector<double>{90, 100}},
                {31, 31, 47})};
  runs[0].order = {{0, 1, 2}, {2, 1, 0}};
  const std::string table = format_chain_table(runs);
  EXPECT_NE(table.find("64x8x2048x16"), std::string::npos) << table;
  EXPECT_NE(table.find("<<<>>>"), std::string::npos) << table;
  EXPECT_NE(table.find("-0.625"), std::string::npos) << table;  // -10 us over 16 edges
  EXPECT_EQ(table.find("outputs of the modes differ"), std::string::npos) << table;

  const nlohmann::json j =
      chain_json(ChainOptions{}, runs, {{"name", "test"}}, nlohmann::json::array(), {"op_chain"});
  EXPECT_EQ(j["tool"], "op_chain");
  EXPECT_EQ(j["options"]["chain_pdl"], "auto");
  ASSERT_EQ(j["cases"].size(), 1u);
  const auto& c = j["cases"][0];
  EXPECT_EQ(c["shape"]["layers"], 16);
  EXPECT_EQ(c["order"][1][0], 2);
  EXPECT_EQ(c["modes"]["ex_pdl"]["graph"]["programmatic_edges"], 47);
  EXPECT_EQ(c["modes"]["ex_pdl"]["replay_us"].size(), 2u);
  EXPECT_DOUBLE_EQ(c["modes"]["ex_pdl"]["replay_us_per_edge"].get<double>(), -0.625);
  // NaN (no extra edge) is written as null, and the text parses back.
  const nlohmann::json text = nlohmann::json::parse(j.dump());
  EXPECT_TRUE(text["cases"][0]["modes"]["chevron"]["replay_us_per_edge"].is_null());
  EXPECT_DOUBLE_EQ(text["cases"][0]["modes"]["ex_pdl"]["replay_us_per_edge"].get<double>(), -0.625);
}

}  // namespace
}  // namespace tpserve::bench
