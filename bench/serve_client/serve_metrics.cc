// Per-request metrics from chunk times, then distributions over the successful requests (in ms).
#include "bench/serve_client/serve_metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace tpserve::bench {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::vector<double> scaled(const std::vector<double>& v, double factor) {
  std::vector<double> out;
  for (double x : v)
    if (!std::isnan(x)) out.push_back(x * factor);
  return out;
}

}  // namespace

RequestMetrics request_metrics(const StreamTiming& t) {
  RequestMetrics m;
  m.output_tokens = t.output_tokens();
  m.e2e_s = t.e2e_s;
  m.ttft_s = t.content_s.empty() ? kNaN : t.content_s.front();
  m.tpot_s = m.output_tokens >= 2 ? (m.e2e_s - m.ttft_s) / (m.output_tokens - 1) : kNaN;
  const double span = t.content_s.empty() ? 0.0 : t.content_s.back() - t.content_s.front();
  m.decode_tps = m.output_tokens >= 2 && span > 0 ? (m.output_tokens - 1) / span : kNaN;
  for (size_t i = 1; i < t.content_s.size(); ++i) m.itl_s.push_back(t.content_s[i] - t.content_s[i - 1]);
  return m;
}

LoadSummary summarize_load(const std::vector<StreamTiming>& timings, double duration_s) {
  LoadSummary s;
  s.requests = static_cast<int>(timings.size());
  s.duration_s = duration_s;
  std::vector<double> ttft, tpot, itl, e2e, tps;
  for (const StreamTiming& t : timings) {
    if (!t.ok) {
      ++s.failed;
      continue;
    }
    const RequestMetrics m = request_metrics(t);
    s.output_tokens += m.output_tokens;
    if (t.prompt_tokens >= 0) s.prompt_tokens = std::max<int64_t>(s.prompt_tokens, 0) + t.prompt_tokens;
    if (t.cached_tokens >= 0)
      s.cached_prompt_tokens = std::max<int64_t>(s.cached_prompt_tokens, 0) + t.cached_tokens;
    ttft.push_back(m.ttft_s), tpot.push_back(m.tpot_s), e2e.push_back(m.e2e_s), tps.push_back(m.decode_tps);
    itl.insert(itl.end(), m.itl_s.begin(), m.itl_s.end());
  }
  s.output_tps = duration_s > 0 ? static_cast<double>(s.output_tokens) / duration_s : kNaN;
  s.requests_per_s = duration_s > 0 ? (s.requests - s.failed) / duration_s : kNaN;
  s.ttft_ms = summarize(scaled(ttft, 1e3));
  s.tpot_ms = summarize(scaled(tpot, 1e3));
  s.itl_ms = summarize(scaled(itl, 1e3));
  s.e2e_ms = summarize(scaled(e2e, 1e3));
  s.decode_tps = summarize(scaled(tps, 1.0));
  return s;
}

nlohmann::json to_json(const LoadSummary& s) {
  return {{"requests", s.requests},
          {"failed", s.failed},
          {"duration_s", s.duration_s},
          {"output_tokens", s.output_tokens},
          {"prompt_tokens", s.prompt_tokens},
          {"cached_prompt_tokens", s.cached_prompt_tokens},
          {"output_tps", s.output_tps},
          {"requests_per_s", s.requests_per_s},
          {"ttft_ms", to_json(s.ttft_ms)},
          {"tpot_ms", to_json(s.tpot_ms)},
          {"itl_ms", to_json(s.itl_ms)},
          {"e2e_ms", to_json(s.e2e_ms)},
          {"request_decode_tps", to_json(s.decode_tps)}};
}

std::string format_load_summary(const LoadSummary& s) {
  std::string out;
  char line[256];
  std::snprintf(line, sizeof(line),
                "requests %d (failed %d) in %.2f s: %lld output tokens, %.1f output tok/s, %.2f req/s\n",
                s.requests, s.failed, s.duration_s, static_cast<long long>(s.output_tokens), s.output_tps,
                s.requests_per_s);
  out += line;
  if (s.prompt_tokens >= 0) {
    if (s.cached_prompt_tokens >= 0)
      std::snprintf(line, sizeof(line), "prompt tokens %lld, %lld of them cached by the server (%.1f%%)\n",
                    static_cast<long long>(s.prompt_tokens), static_cast<long long>(s.cached_prompt_tokens),
                    s.prompt_tokens > 0 ? 100.0 * s.cached_prompt_tokens / s.prompt_tokens : 0.0);
    else
      std::snprintf(line, sizeof(line), "prompt tokens %lld (cached share not reported)\n",
                    static_cast<long long>(s.prompt_tokens));
    out += line;
  }
  std::snprintf(line, sizeof(line), "%-26s %10s %10s %10s\n", "metric", "mean", "median", "p99");
  out += line;
  auto row = [&](const char* name, const Distribution& d) {
    std::snprintf(line, sizeof(line), "%-26s %10.2f %10.2f %10.2f\n", name, d.mean, d.median, d.p99);
    out += line;
  };
  row("TTFT ms", s.ttft_ms);
  row("TPOT ms", s.tpot_ms);
  row("ITL ms", s.itl_ms);
  row("E2E ms", s.e2e_ms);
  row("per-request decode tok/s", s.decode_tps);
  return out;
}

}  // namespace tpserve::bench
