// ServerMetrics: the Prometheus metrics of GET /metrics, named as vLLM names them (with the tpserve: prefix)
// so that existing dashboards apply: latency histograms (time to first token, inter-token latency,
// end-to-end latency, queue time), token and request counters, gauges of the scheduler's state, and the
// speculative decoding counters, and what the server's limits refused. Thread-safe: the engine loop records,
// HTTP threads render.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/engine/scheduler.h"

namespace tpserve::serve {

class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double value);
  // Prometheus text lines for `name` (cumulative buckets, +Inf, _sum, _count) with extra labels.
  void render(std::string& out, const std::string& name, const std::string& labels) const;
  uint64_t count() const { return count_; }

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket, not cumulative
  double sum_ = 0;
  uint64_t count_ = 0;
};

struct SchedulerGauges {
  int num_running = 0;
  int num_waiting = 0;
  double kv_cache_usage = 0;    // fraction of KV blocks in use, 0..1
  int64_t num_preemptions = 0;  // sequences evicted from the KV cache to make room (recomputed later)
};

class ServerMetrics {
 public:
  explicit ServerMetrics(const std::string& model_name = "");
  // The model_name label (known once the model is opened).
  void set_model_name(const std::string& model_name);

  void observe_time_to_first_token(double seconds);
  void observe_inter_token_latency(double seconds);
  void observe_e2e_latency(double seconds);
  void observe_queue_time(double seconds);
  void add_prompt_tokens(int64_t n);
  void add_generation_tokens(int64_t n);
  // A request that completed (finish_reason stop or length); aborted ones are not successes.
  void count_success(const std::string& finish_reason);
  // Speculative decoding (MTP): the scheduler's running totals, set after every step (zero without
  // speculation; exported anyway so that dashboards find them). accepted_at[j]: verifications that
  // accepted the draft at position j.
  void set_spec_decode(const SpeculativeMetrics& totals);
  // Prefix caching: the scheduler's running totals (prompt tokens queried and found cached), set alike.
  void set_prefix_cache(const PrefixCacheMetrics& totals);

  // A request or connection refused by a server limit; reason is its error code (unauthorized,
  // too_many_connections, server_overloaded, request_timeout, request_too_large, limit_exceeded).
  void count_refusal(const std::string& reason);

  // The whole /metrics page; open_connections: HTTP connections open now.
  std::string render(const SchedulerGauges& gauges, int open_connections = 0) const;

 private:
  std::string model_label_;
  mutable std::mutex mutex_;
  Histogram ttft_, itl_, e2e_, queue_;
  int64_t prompt_tokens_ = 0, generation_tokens_ = 0;
  std::map<std::string, int64_t> success_;  // by finish reason
  SpeculativeMetrics spec_;
  PrefixCacheMetrics prefix_cache_;
  std::map<std::string, int64_t> refused_;  // by reason
};

}  // namespace tpserve::serve
