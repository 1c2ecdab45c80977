// Serving metrics of a serve_client run, named and defined as in common practice (vLLM's benchmark_serving):
//   TTFT  time to first token: request sent -> first chunk with content
//   TPOT  time per output token after the first: (E2E - TTFT) / (output tokens - 1)
//   ITL   inter-token latency: gaps between successive content chunks (all requests pooled)
//   E2E   request sent -> end of the stream
//   output tok/s             all output tokens / run duration
//   per-request decode tok/s (output tokens - 1) / (last content chunk - first content chunk)
// each as mean, median and p99 (and p10/p90) over the successful requests.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "bench/common/sample_stats.h"
#include "bench/serve_client/chat_stream.h"

namespace tpserve::bench {

struct RequestMetrics {
  double ttft_s = 0;
  double tpot_s = 0;  // NaN with fewer than two tokens
  double e2e_s = 0;
  double decode_tps = 0;  // NaN with fewer than two tokens or content chunks
  int output_tokens = 0;
  std::vector<double> itl_s;
};
RequestMetrics request_metrics(const StreamTiming& timing);

struct LoadSummary {
  int requests = 0;
  int failed = 0;
  double duration_s = 0;
  int64_t output_tokens = 0;
  // Prompt tokens the server reported (usage.prompt_tokens) and, of them, those its prefix cache held
  // (usage.prompt_tokens_details.cached_tokens); -1 where no request reported them.
  int64_t prompt_tokens = -1, cached_prompt_tokens = -1;
  double output_tps = 0;
  double requests_per_s = 0;
  Distribution ttft_ms, tpot_ms, itl_ms, e2e_ms, decode_tps;
};
LoadSummary summarize_load(const std::vector<StreamTiming>& timings, double duration_s);

nlohmann::json to_json(const LoadSummary& summary);
std::string format_load_summary(const LoadSummary& summary);

}  // namespace tpserve::bench
