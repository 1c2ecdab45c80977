// Table and JSON of op_chain. NaN (no extra edge, no sample) prints as "-" in the table and null in JSON.
#include "bench/op_chain/chain_report.h"

#include <cmath>
#include <cstdio>

#include "bench/common/build_info.h"
#include "bench/common/machine_info.h"

namespace tpserve::bench {
namespace {

std::string fixed(double v, int decimals) {
  if (std::isnan(v)) return "-";
  char text[32];
  std::snprintf(text, sizeof(text), "%.*f", decimals, v);
  return text;
}

std::string spread(const Distribution& d) {
  return fixed(d.median, 2) + " (" + fixed(d.p10, 1) + "-" + fixed(d.p90, 1) + ")";
}

std::string signed_delta(const PairedDifference& p, bool baseline) {
  if (baseline) return "base";
  if (std::isnan(p.median)) return "-";
  return (p.median > 0 ? "+" : "") + fixed(p.median, 2);
}

std::string sign_held(const PairedDifference& p, bool baseline) {
  if (baseline || p.rounds == 0) return "-";
  return std::to_string(p.sign_held) + "/" + std::to_string(p.rounds);
}

nlohmann::json paired_json(const PairedDifference& p) {
  return {
      {"rounds", p.rounds}, {"median_us", p.median}, {"relative", p.relative()}, {"sign_held", p.sign_held}};
}

}  // namespace

const char* const kConsumerDescription =
    "bench/op_chain/consumer_kernel.cu: shaped like kernels/moe_combine.cu (grid column-chunk x token, 128 "
    "threads, 8 bf16 columns a thread); out[t] = x[t] + sum_j weight[t, j] * table[id[t, j]] over the top-k "
    "gating's ids and weights, in slot order; reads k rows of H bf16 per token; enrolled in PDL "
    "(pdl_wait before its first read of predecessor output)";

std::string format_chain_table(const std::vector<CaseRun>& runs) {
  std::string out;
  char line[320];
  std::snprintf(line, sizeof(line), "%-14s %4s %-18s %7s %10s %22s %22s %9s %8s %5s %9s %8s %5s\n",
                "shape ExkxHxL", "T", "consumer launch", "kernels", "prog.edges", "replay us (p10-p90)",
                "eager us (p10-p90)", "replay-ex", "us/edge", "sign", "eager-ex", "us/edge", "sign");
  out += line;
  for (const CaseRun& run : runs) {
    const auto summaries = summarize_case(run);
    for (LaunchMode mode : kLaunchModes) {
      const ModeSummary& s = summaries[static_cast<int>(mode)];
      const GraphReport& g = run.modes[static_cast<int>(mode)].graph;
      const bool base = mode == kBaselineMode;
      std::snprintf(line, sizeof(line), "%-14s %4d %-18s %7d %10d %22s %22s %9s %8s %5s %9s %8s %5s\n",
                    run.shape.name().c_str(), run.tokens, mode_label(mode), g.kernel_nodes,
                    s.programmatic_edges, spread(s.replay).c_str(), spread(s.eager).c_str(),
                    signed_delta(s.replay_vs_base, base).c_str(), fixed(s.replay_us_per_edge, 3).c_str(),
                    sign_held(s.replay_vs_base, base).c_str(), signed_delta(s.eager_vs_base, base).c_str(),
                    fixed(s.eager_us_per_edge, 3).c_str(), sign_held(s.eager_vs_base, base).c_str());
      out += line;
    }
    if (!run.outputs_match)
      out += "  ^ outputs of the modes differ: timings of this case are not comparable\n";
  }
  out +=
      "replay-ex, eager-ex: median over rounds of (this mode - LaunchKernelEx without attribute), us\n"
      "us/edge: that over the mode's extra programmatic edges; sign: rounds whose difference had the "
      "median's sign\n";
  return out;
}

nlohmann::json graph_json(const GraphReport& g) {
  return {{"nodes", g.nodes},
          {"kernel_nodes", g.kernel_nodes},
          {"edges", g.edges},
          {"programmatic_edges", g.programmatic_edges},
          {"pdl_kernel_nodes_after_kernel", g.pdl_kernel_nodes_after_kernel},
          {"kernels_per_site", g.kernels_per_site},
          {"programmatic_edges_per_site", g.programmatic_edges_per_site},
          {"capture_ms", g.capture_ms},
          {"memory_bytes", g.memory_bytes}};
}

nlohmann::json chain_json(const ChainOptions& o, const std::vector<CaseRun>& runs,
                          const nlohmann::json& device, const nlohmann::json& pdl_decisions,
                          const std::vector<std::string>& command_line) {
  nlohmann::json shapes = nlohmann::json::array();
  for (const ChainShape& s : o.shapes) shapes.push_back(s.name());
  nlohmann::json j = {{"tool", "op_chain"},
                      {"date", utc_timestamp()},
                      {"build", to_json(build_info())},
                      {"machine", to_json(machine_info())},
                      {"device", device},
                      {"command_line", command_line},
                      {"options",
                       {{"shapes", shapes},
                        {"tokens", o.tokens},
                        {"rounds", o.rounds},
                        {"replays", o.replays},
                        {"chain_pdl", kernels::pdl_mode_name(o.chain_pdl)},
                        {"seed", o.seed},
                        {"device", o.device}}},
                      {"consumer", kConsumerDescription},
                      {"baseline_mode", mode_name(kBaselineMode)},
                      {"pdl_decisions", pdl_decisions}};
  nlohmann::json cases = nlohmann::json::array();
  for (const CaseRun& run : runs) {
    const auto summaries = summarize_case(run);
    nlohmann::json modes = nlohmann::json::object();
    for (LaunchMode mode : kLaunchModes) {
      const ModeSummary& s = summaries[static_cast<int>(mode)];
      const ModeRun& m = run.modes[static_cast<int>(mode)];
      modes[mode_name(mode)] = {{"label", mode_label(mode)},
                                {"graph", graph_json(m.graph)},
                                {"replay_us", m.replay_us},
                                {"eager_us", m.eager_us},
                                {"replay", to_json(s.replay)},
                                {"eager", to_json(s.eager)},
                                {"extra_programmatic_edges", s.extra_edges},
                                {"replay_vs_base", paired_json(s.replay_vs_base)},
                                {"eager_vs_base", paired_json(s.eager_vs_base)},
                                {"replay_us_per_edge", s.replay_us_per_edge},
                                {"eager_us_per_edge", s.eager_us_per_edge}};
    }
    cases.push_back({{"shape",
                      {{"name", run.shape.name()},
                       {"experts", run.shape.experts},
                       {"top_k", run.shape.top_k},
                       {"hidden", run.shape.hidden},
                       {"layers", run.shape.layers}}},
                     {"tokens", run.tokens},
                     {"router_gemm", run.router_gemm},
                     {"outputs_match", run.outputs_match},
                     {"order", run.order},
                     {"modes", modes}});
  }
  j["cases"] = cases;
  return j;
}

}  // namespace tpserve::bench
