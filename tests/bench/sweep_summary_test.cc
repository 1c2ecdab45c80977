// tp_decode's summary and outputs on a hand-made sweep: decode-only steps, per-request tok/s, TTFT, bytes and
// the floor, paired differences per round, and the CSV / JSON / SVG written from them.
#include <gtest/gtest.h>

#include <cmath>

#include "bench/tp_decode/sweep_report.h"
#include "bench/tp_decode/sweep_summary.h"

namespace tpserve::bench {
namespace {

// A round of `arm` whose decode steps take step_ms each (after one prefill step of 50 ms); 2 requests.
RoundRecord make_round(int arm, int round, double step_ms) {
  RoundRecord r;
  r.arm = arm, r.concurrency = 2, r.round = round, r.wall_s = 1.0;
  StepSample prefill{.wall_s = 0.050,
                     .stats = {.tokens = 16, .sequences = 2, .samples = 2, .prefill_seqs = 2},
                     .bytes = 1e9,
                     .busy_s = NAN};
  r.steps.push_back(prefill);
  for (int i = 0; i < 4; ++i)
    r.steps.push_back({.wall_s = step_ms / 1e3,
                       .stats = {.tokens = 2, .sequences = 2, .samples = 2, .decode_seqs = 2},
                       .bytes = 2e6,
                       .busy_s = NAN});
  r.requests = {{.first_token_s = 0.05, .last_token_s = 0.05 + 4 * step_ms / 1e3, .tokens = 5},
                {.first_token_s = 0.05, .last_token_s = 0.05 + 4 * step_ms / 1e3, .tokens = 5}};
  return r;
}

struct Fixture {
  SweepOptions options;
  SweepResult result;
  Fixture() {
    options.config_path = "configs/tiny.yaml";
    options.concurrency = {2};
    options.rounds = 4;
    options.arms = {{"a", {}}, {"b", {"runtime.max_batch=4"}}};
    result.arms = {ArmRecord{.spec = options.arms[0]}, ArmRecord{.spec = options.arms[1]}};
    result.hbm_gbps = 1.0;  // 2 MB per step at 1 GB/s: a 2 ms floor
    result.bandwidth_source = "--hbm-gbps";
    const double a_ms[] = {10, 11, 10, 12}, b_ms[] = {12, 12, 13, 11};  // b slower in 3 of 4 rounds
    for (int r = 0; r < 4; ++r) {
      result.rounds.push_back(make_round(0, r, a_ms[r]));
      result.rounds.push_back(make_round(1, r, b_ms[r]));
    }
  }
};

TEST(SweepSummary, DecodeStepsRequestsAndPairs) {
  const Fixture f;
  const SweepSummary s = summarize_sweep(f.options, f.result);
  ASSERT_EQ(s.arms.size(), 2u);
  const ArmSummary& a = s.arms[0];
  EXPECT_EQ(a.arm, "a");
  EXPECT_EQ(a.rounds, 4);
  EXPECT_EQ(a.requests, 8);
  EXPECT_EQ(a.decode_step_ms.count, 16);  // the prefill steps are left out
  EXPECT_NEAR(a.decode_step_ms.median, 10.5, 1e-9);
  EXPECT_NEAR(a.ttft_ms.median, 50, 1e-9);
  // (tokens - 1) / (last - first) per request: 100, 90.9, 100, 83.3 tok/s in the four rounds.
  EXPECT_NEAR(a.request_decode_tps.median, (100 + 1000.0 / 11) / 2, 1e-9);
  EXPECT_NEAR(a.output_tps, 10, 1e-9);  // 10 tokens in 1 s
  EXPECT_NEAR(a.bytes_per_step, 2e6, 1e-6);
  EXPECT_NEAR(a.floor_ms, 2, 1e-9);
  EXPECT_NEAR(a.floor_share, 2 / 10.5, 1e-9);
  EXPECT_TRUE(std::isnan(a.busy_share));
  EXPECT_NEAR(a.round_step_median_ms[3], 12, 1e-9);

  ASSERT_EQ(s.pairs.size(), 1u);
  const PairSummary& p = s.pairs[0];
  EXPECT_EQ(p.a, "a");
  EXPECT_EQ(p.b, "b");
  EXPECT_EQ(p.step_ms.rounds, 4);
  EXPECT_NEAR(p.step_ms.median, 1.5, 1e-9);  // differences 2, 1, 3, -1
  EXPECT_EQ(p.step_ms.sign_held, 3);
}

TEST(SweepSummary, TableCsvJsonAndPlot) {
  const Fixture f;
  const SweepSummary s = summarize_sweep(f.options, f.result);
  const std::string table = format_summary_table(s);
  EXPECT_NE(table.find("1.0 GB/s (--hbm-gbps)"), std::string::npos);
  EXPECT_NE(table.find("3/4"), std::string::npos);
  EXPECT_NE(table.find("n/a"), std::string::npos);  // busy share

  const std::string csv = summary_csv(s);
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 3);
  EXPECT_EQ(csv.rfind("arm,concurrency,rounds,", 0), 0u);
  EXPECT_NE(csv.find("\na,2,4,8,"), std::string::npos);
  EXPECT_NE(csv.find(",\n"), std::string::npos) << "unknown busy share is an empty cell";

  const nlohmann::json j = sweep_json(f.options, f.result, s, {"tp_decode", "--config", "x"});
  EXPECT_EQ(j["tool"], "tp_decode");
  EXPECT_EQ(j["rounds"].size(), 8u);
  EXPECT_EQ(j["rounds"][0]["steps"]["wall_s"].size(), 5u);
  EXPECT_EQ(j["summary"].size(), 2u);
  EXPECT_EQ(j["pairs"][0]["sign_held"], 3);
  EXPECT_EQ(j["arms"][1]["overrides"][0], "runtime.max_batch=4");
  EXPECT_TRUE(j["build"].contains("git_describe"));
  EXPECT_TRUE(j["machine"].contains("hostname"));
  const nlohmann::json written = nlohmann::json::parse(j.dump());
  EXPECT_TRUE(written["rounds"][0]["steps"]["busy_s"][0].is_null());  // NaN is written as null

  const std::string svg = sweep_plot_svg(s, "test");
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_NE(svg.find(">a</text>"), std::string::npos);
  EXPECT_NE(svg.find(">b</text>"), std::string::npos);
}

}  // namespace
}  // namespace tpserve::bench
