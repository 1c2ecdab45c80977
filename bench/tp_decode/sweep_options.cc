// Parsers for --concurrency and --arm, and the checks of the whole option set.
#include "bench/tp_decode/sweep_options.h"

#include <algorithm>
#include <cctype>
#include <optional>
#include <set>

#include "common/error.h"

namespace tpserve::bench {
namespace {

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

bool valid_arm_name(const std::string& name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
  });
}

// `parse` (std::stod, std::stol as a lambda) over all of `text`; nullopt where it throws or leaves
// characters.
template <typename Parse>
auto parse_whole(const std::string& text, Parse parse) -> std::optional<decltype(parse(text, nullptr))> {
  size_t used = 0;
  try {
    const auto v = parse(text, &used);
    if (used == text.size() && !text.empty()) return v;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

double parse_number(const std::string& arm, const std::string& key, const std::string& value) {
  const auto v = parse_whole(value, [](const std::string& t, size_t* used) { return std::stod(t, used); });
  TPS_CHECK(v.has_value(), "--arm ", arm, ": ", key, "='", value, "' is not a number");
  return *v;
}

void parse_bench_key(ArmSpec& arm, const std::string& key, const std::string& value) {
  const double v = parse_number(arm.name, key, value);
  if (key == "bench.scripted_drafts") {
    TPS_CHECK(v >= 1 && v <= 4 && v == static_cast<int>(v), "--arm ", arm.name,
              ": bench.scripted_drafts must be 1..4, not ", value);
    arm.scripted_drafts = static_cast<int>(v);
  } else if (key == "bench.draft_acceptance") {
    TPS_CHECK(v >= 0 && v <= 1, "--arm ", arm.name, ": bench.draft_acceptance must be in [0, 1], not ",
              value);
    arm.draft_acceptance = v;
  } else if (key == "bench.skip_all_reduce") {
    TPS_CHECK(v == 0 || v == 1, "--arm ", arm.name, ": bench.skip_all_reduce must be 0 or 1, not ", value);
    arm.skip_all_reduce = v == 1;
  } else if (key == "bench.presence_penalty" || key == "bench.frequency_penalty") {
    TPS_CHECK(v >= -2 && v <= 2, "--arm ", arm.name, ": ", key, " must be in [-2, 2], not ", value);
    (key == "bench.presence_penalty" ? arm.processing.presence_penalty : arm.processing.frequency_penalty) =
        static_cast<float>(v);
  } else if (key == "bench.repetition_penalty") {
    TPS_CHECK(v > 0, "--arm ", arm.name, ": bench.repetition_penalty must be > 0, not ", value);
    arm.processing.repetition_penalty = static_cast<float>(v);
  } else if (key == "bench.logit_bias_tokens") {
    TPS_CHECK(v >= 0 && v <= 1024 && v == static_cast<int>(v), "--arm ", arm.name,
              ": bench.logit_bias_tokens must be 0..1024, not ", value);
    arm.processing.logit_bias.clear();
    for (int t = 0; t < static_cast<int>(v); ++t) arm.processing.logit_bias.emplace_back(t, 0.5f);
  } else if (key == "bench.token_mask") {
    TPS_CHECK(v == 0 || v == 1, "--arm ", arm.name, ": bench.token_mask must be 0 or 1, not ", value);
    arm.token_mask = v == 1;
  } else {
    TPS_THROW(
        "--arm ", arm.name, ": unknown tp_decode key '", key,
        "' (bench.scripted_drafts, bench.draft_acceptance, bench.skip_all_reduce, bench.presence_penalty, "
        "bench.frequency_penalty, bench.repetition_penalty, bench.logit_bias_tokens, bench.token_mask)");
  }
}

}  // namespace

std::vector<std::string> split_top_level(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::string current;
  int depth = 0;
  for (char c : text) {
    if (c == '[' || c == '{') ++depth;
    if (c == ']' || c == '}') depth = std::max(depth - 1, 0);
    if (c == separator && depth == 0) {
      parts.push_back(current);
      current.clear();
    } else {
      current += c;
    }
  }
  parts.push_back(current);
  return parts;
}

std::vector<int> parse_concurrency_list(const std::string& text) {
  std::vector<int> values;
  for (const std::string& raw : split_top_level(text, ',')) {
    const std::string item = trim(raw);
    const auto parsed =
        parse_whole(item, [](const std::string& t, size_t* used) { return std::stol(t, used); });
    const long v = parsed.value_or(0);
    TPS_CHECK(v >= 1 && v <= 1 << 16, "--concurrency: '", item, "' is not a positive integer (e.g. 1,2,4,8)");
    TPS_CHECK(std::find(values.begin(), values.end(), v) == values.end(), "--concurrency: ", v,
              " appears twice");
    values.push_back(static_cast<int>(v));
  }
  return values;
}

ArmSpec parse_arm(const std::string& text) {
  ArmSpec arm;
  const size_t colon = text.find(':');
  arm.name = trim(text.substr(0, colon));
  TPS_CHECK(valid_arm_name(arm.name), "--arm '", text,
            "': the name must be letters, digits, '_', '-' or '.' ", "(name:key=value[,key=value])");
  if (colon == std::string::npos) return arm;
  const std::string rest = text.substr(colon + 1);
  if (trim(rest).empty()) return arm;
  for (const std::string& raw : split_top_level(rest, ',')) {
    const std::string item = trim(raw);
    const size_t eq = item.find('=');
    TPS_CHECK(eq != std::string::npos && eq > 0, "--arm ", arm.name, ": '", item, "' is not key=value");
    const std::string key = item.substr(0, eq), value = trim(item.substr(eq + 1));
    if (key.rfind("bench.", 0) == 0) {
      parse_bench_key(arm, key, value);
    } else {
      arm.overrides.push_back(item);
    }
  }
  return arm;
}

void finalize_options(SweepOptions& o) {
  TPS_CHECK(!o.config_path.empty(), "--config is required");
  TPS_CHECK(!o.concurrency.empty(), "--concurrency: no levels given");
  TPS_CHECK(o.input_len >= 1, "--input-len must be >= 1");
  TPS_CHECK(o.shared_prefix_len >= 0 && o.shared_prefix_len <= o.input_len,
            "--shared-prefix must be within 0..--input-len (", o.input_len, ")");
  TPS_CHECK(o.output_len >= 1, "--output-len must be >= 1");
  TPS_CHECK(o.rounds >= 1, "--rounds must be >= 1");
  TPS_CHECK(!o.hbm_gbps || *o.hbm_gbps > 0, "--hbm-gbps must be positive");
  TPS_CHECK(o.phase_trace_layer >= -1, "--phase-trace-layer must be >= 0 (or -1: the last layer)");
  TPS_CHECK(o.phase_trace_layer < 0 || o.phase_trace, "--phase-trace-layer needs --phase-trace");
  if (o.arms.empty()) o.arms.push_back({"base", {}});
  std::set<std::string> names;
  for (const auto& arm : o.arms) {
    TPS_CHECK(names.insert(arm.name).second, "--arm: the name '", arm.name, "' is used twice");
    TPS_CHECK(arm.scripted_drafts > 0 || arm.draft_acceptance == 1.0, "--arm ", arm.name,
              ": bench.draft_acceptance needs bench.scripted_drafts");
  }
}

}  // namespace tpserve::bench
