// Fixed-width table, CSV (empty cells for unknown values), JSON (raw samples column-wise), SVG.
#include "bench/tp_decode/sweep_report.h"

#include <cmath>
#include <cstdio>
#include <map>

#include "bench/common/build_info.h"
#include "bench/common/machine_info.h"
#include "bench/common/svg_chart.h"

namespace tpserve::bench {
namespace {

std::string csv_number(double v) {
  if (std::isnan(v)) return "";
  char text[32];
  std::snprintf(text, sizeof(text), "%.6g", v);
  return text;
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

nlohmann::json round_json(const SweepOptions& o, const RoundRecord& r) {
  nlohmann::json steps = {
      {"wall_s", nlohmann::json::array()},         {"tokens", nlohmann::json::array()},
      {"sequences", nlohmann::json::array()},      {"decode_seqs", nlohmann::json::array()},
      {"prefill_tokens", nlohmann::json::array()}, {"context_tokens", nlohmann::json::array()},
      {"bytes", nlohmann::json::array()},          {"busy_s", nlohmann::json::array()},
      {"schedule_s", nlohmann::json::array()},     {"broadcast_s", nlohmann::json::array()},
      {"enqueue_s", nlohmann::json::array()},      {"wait_s", nlohmann::json::array()},
      {"complete_s", nlohmann::json::array()}};
  for (const StepSample& s : r.steps) {
    steps["wall_s"].push_back(s.wall_s);
    steps["tokens"].push_back(s.stats.tokens);
    steps["sequences"].push_back(s.stats.sequences);
    steps["decode_seqs"].push_back(s.stats.decode_seqs);
    steps["prefill_tokens"].push_back(s.stats.prefill_tokens);
    steps["context_tokens"].push_back(s.stats.context_tokens);
    steps["bytes"].push_back(s.bytes);  // NaN is written as null
    steps["busy_s"].push_back(s.busy_s);
    steps["schedule_s"].push_back(s.stats.schedule_s);
    steps["broadcast_s"].push_back(s.stats.broadcast_s);
    steps["enqueue_s"].push_back(s.stats.enqueue_s);
    steps["wait_s"].push_back(s.stats.wait_s);
    steps["complete_s"].push_back(s.stats.complete_s);
  }
  nlohmann::json requests = {{"first_token_s", nlohmann::json::array()},
                             {"last_token_s", nlohmann::json::array()},
                             {"tokens", nlohmann::json::array()}};
  for (const RequestSample& q : r.requests) {
    requests["first_token_s"].push_back(q.first_token_s);
    requests["last_token_s"].push_back(q.last_token_s);
    requests["tokens"].push_back(q.tokens);
  }
  nlohmann::json kernels = nlohmann::json::array();
  for (const KernelTime& k : r.kernels)
    kernels.push_back({{"name", k.name},
                       {"launches", k.launches},
                       {"seconds", k.seconds},
                       {"advance_seconds", k.advance_seconds}});
  return {{"arm", o.arms[r.arm].name},
          {"concurrency", r.concurrency},
          {"kernel_steps", r.decode_only_steps()},
          {"drafts", r.drafts},
          {"draft_tokens", r.draft_tokens},
          {"accepted_tokens", r.accepted_tokens},
          {"kernels", kernels},
          {"round", r.round},
          {"position", r.position},
          {"start_s", r.start_s},
          {"wall_s", r.wall_s},
          {"steps", steps},
          {"requests", requests}};
}

}  // namespace

std::string format_or_na(double value, int decimals) {
  if (std::isnan(value)) return "n/a";
  char text[48];
  std::snprintf(text, sizeof(text), "%.*f", decimals, value);
  return text;
}

std::string format_summary_table(const SweepSummary& sum) {
  std::string out;
  char line[512];
  std::snprintf(line, sizeof(line), "%-12s %5s %6s %10s %9s %9s %9s %9s %10s %9s %9s %7s %6s\n", "arm",
                "conc", "rounds", "req tok/s", "step ms", "p10", "p90", "TTFT ms", "out tok/s", "MB/step",
                "floor ms", "floor%", "busy%");
  out += line;
  for (const ArmSummary& s : sum.arms) {
    std::snprintf(
        line, sizeof(line), "%-12s %5d %6d %10s %9s %9s %9s %9s %10s %9s %9s %7s %6s\n", s.arm.c_str(),
        s.concurrency, s.rounds, format_or_na(s.request_decode_tps.median, 1).c_str(),
        format_or_na(s.decode_step_ms.median, 3).c_str(), format_or_na(s.decode_step_ms.p10, 3).c_str(),
        format_or_na(s.decode_step_ms.p90, 3).c_str(), format_or_na(s.ttft_ms.median, 2).c_str(),
        format_or_na(s.output_tps, 1).c_str(), format_or_na(s.bytes_per_step / 1e6, 2).c_str(),
        format_or_na(s.floor_ms, 3).c_str(), format_or_na(s.floor_share * 100, 1).c_str(),
        format_or_na(s.busy_share * 100, 1).c_str());
    out += line;
  }
  bool speculative = false;
  for (const ArmSummary& s : sum.arms) speculative = speculative || !std::isnan(s.draft_acceptance);
  if (speculative) {
    out += "speculative decoding: drafts accepted / proposed, tokens per verification\n";
    for (const ArmSummary& s : sum.arms) {
      if (std::isnan(s.draft_acceptance)) continue;
      std::snprintf(line, sizeof(line), "%-12s %5d   accepted %6s%%   tokens per verification %s\n",
                    s.arm.c_str(), s.concurrency, format_or_na(s.draft_acceptance * 100, 1).c_str(),
                    format_or_na(s.mean_accepted_length, 3).c_str());
      out += line;
    }
  }
  out += "bandwidth for the floor: " +
         (sum.hbm_gbps ? format_or_na(*sum.hbm_gbps, 1) + " GB/s (" + sum.bandwidth_source + ")"
                       : std::string("n/a")) +
         "\n";
  if (sum.pairs.empty()) return out;
  out += "\npaired rounds: decode step time median, difference b - a per round\n";
  std::snprintf(line, sizeof(line), "%-12s %-12s %5s %8s %13s %9s %10s\n", "a", "b", "conc", "rounds",
                "median diff ms", "rel %", "sign held");
  out += line;
  for (const PairSummary& p : sum.pairs) {
    // One round has no spread to hold a sign against.
    const std::string held =
        p.step_ms.rounds < 2 ? std::string("n/a")
                             : std::to_string(p.step_ms.sign_held) + "/" + std::to_string(p.step_ms.rounds);
    std::snprintf(line, sizeof(line), "%-12s %-12s %5d %8d %14s %9s %10s\n", p.a.c_str(), p.b.c_str(),
                  p.concurrency, p.step_ms.rounds, format_or_na(p.step_ms.median, 4).c_str(),
                  format_or_na(p.step_ms.relative() * 100, 2).c_str(), held.c_str());
    out += line;
  }
  return out;
}

std::string summary_csv(const SweepSummary& sum) {
  std::string out =
      "arm,concurrency,rounds,requests,request_decode_tps_median,request_decode_tps_p10,request_decode_tps_"
      "p90,"
      "decode_steps,step_ms_median,step_ms_p10,step_ms_p90,ttft_ms_median,output_tps,bytes_per_step,floor_ms,"
      "floor_share,busy_share\n";
  for (const ArmSummary& s : sum.arms) {
    out += csv_field(s.arm) + "," + std::to_string(s.concurrency) + "," + std::to_string(s.rounds) + "," +
           std::to_string(s.requests) + "," + csv_number(s.request_decode_tps.median) + "," +
           csv_number(s.request_decode_tps.p10) + "," + csv_number(s.request_decode_tps.p90) + "," +
           std::to_string(s.decode_step_ms.count) + "," + csv_number(s.decode_step_ms.median) + "," +
           csv_number(s.decode_step_ms.p10) + "," + csv_number(s.decode_step_ms.p90) + "," +
           csv_number(s.ttft_ms.median) + "," + csv_number(s.output_tps) + "," +
           csv_number(s.bytes_per_step) + "," + csv_number(s.floor_ms) + "," + csv_number(s.floor_share) +
           "," + csv_number(s.busy_share) + "\n";
  }
  return out;
}

nlohmann::json sweep_json(const SweepOptions& o, const SweepResult& r, const SweepSummary& sum,
                          const std::vector<std::string>& command_line) {
  nlohmann::json j;
  j["tool"] = "tp_decode";
  j["date"] = utc_timestamp();
  j["build"] = to_json(build_info());
  j["machine"] = to_json(machine_info());
  j["command_line"] = command_line;
  j["world_size"] = r.world_size;
  j["wall_s"] = r.wall_s;
  j["options"] = {{"config", o.config_path},
                  {"set", o.overrides},
                  {"concurrency", o.concurrency},
                  {"input_len", o.input_len},
                  {"shared_prefix", o.shared_prefix_len},
                  {"output_len", o.output_len},
                  {"rounds", o.rounds},
                  {"seed", o.seed},
                  {"warmup", o.warmup},
                  {"one_engine_at_a_time", o.one_engine_at_a_time}};
  j["bandwidth"] = {{"gbps", r.hbm_gbps ? nlohmann::json(*r.hbm_gbps) : nlohmann::json()},
                    {"source", r.bandwidth_source}};
  for (const ArmRecord& a : r.arms)
    j["arms"].push_back({{"name", a.spec.name},
                         {"overrides", a.spec.overrides},
                         {"config_yaml", a.config_yaml},
                         {"backend", a.backend},
                         {"device_probe", a.probe},
                         {"cost_model", a.cost_model},
                         {"bandwidth_gbps_measured", a.bandwidth_gbps}});
  j["rounds"] = nlohmann::json::array();
  for (const RoundRecord& rec : r.rounds) j["rounds"].push_back(round_json(o, rec));
  for (const ArmSummary& s : sum.arms)
    j["summary"].push_back({{"arm", s.arm},
                            {"concurrency", s.concurrency},
                            {"rounds", s.rounds},
                            {"requests", s.requests},
                            {"request_decode_tps", to_json(s.request_decode_tps)},
                            {"decode_step_ms", to_json(s.decode_step_ms)},
                            {"ttft_ms", to_json(s.ttft_ms)},
                            {"output_tps", s.output_tps},
                            {"bytes_per_step", s.bytes_per_step},
                            {"floor_ms", s.floor_ms},
                            {"floor_share", s.floor_share},
                            {"busy_share", s.busy_share},
                            {"draft_acceptance", s.draft_acceptance},
                            {"mean_accepted_length", s.mean_accepted_length},
                            {"round_step_median_ms", s.round_step_median_ms}});
  j["pairs"] = nlohmann::json::array();
  for (const PairSummary& p : sum.pairs)
    j["pairs"].push_back({{"a", p.a},
                          {"b", p.b},
                          {"concurrency", p.concurrency},
                          {"rounds", p.step_ms.rounds},
                          {"step_ms_median_diff", p.step_ms.median},
                          {"step_ms_relative_diff", p.step_ms.relative()},
                          {"sign_held", p.step_ms.sign_held},
                          {"sign_held_share", p.step_ms.sign_held_share()}});
  return j;
}

std::string sweep_plot_svg(const SweepSummary& sum, const std::string& title) {
  ChartPanel tps{.title = "per-request decode tok/s (median, p10-p90)",
                 .x_label = "concurrency (requests)",
                 .y_label = "tokens / s per request",
                 .log2_x = true,
                 .series = {}};
  ChartPanel step{.title = "decode step time (median, p10-p90)",
                  .x_label = "concurrency (requests)",
                  .y_label = "ms per step",
                  .log2_x = true,
                  .series = {}};
  std::map<std::string, size_t> index;
  for (const ArmSummary& s : sum.arms) {
    if (!index.count(s.arm)) {
      index[s.arm] = tps.series.size();
      tps.series.push_back({.name = s.arm, .x = {}, .y = {}, .y_low = {}, .y_high = {}});
      step.series.push_back({.name = s.arm, .x = {}, .y = {}, .y_low = {}, .y_high = {}});
    }
    ChartSeries& a = tps.series[index[s.arm]];
    ChartSeries& b = step.series[index[s.arm]];
    a.x.push_back(s.concurrency), b.x.push_back(s.concurrency);
    a.y.push_back(s.request_decode_tps.median), b.y.push_back(s.decode_step_ms.median);
    a.y_low.push_back(s.request_decode_tps.p10), a.y_high.push_back(s.request_decode_tps.p90);
    b.y_low.push_back(s.decode_step_ms.p10), b.y_high.push_back(s.decode_step_ms.p90);
  }
  return render_svg(title, {tps, step});
}

}  // namespace tpserve::bench
