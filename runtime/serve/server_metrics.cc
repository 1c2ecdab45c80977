#include "runtime/serve/server_metrics.h"

#include <algorithm>
#include <sstream>

namespace tpserve::serve {
namespace {

std::string number(double v) {
  std::ostringstream os;
  os.precision(10);
  os << v;
  return os.str();
}

std::string escape_label(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

void header(std::string& out, const std::string& name, const char* type, const char* help) {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

// Latency buckets (seconds): fine below 100 ms, where decode steps of a low-latency server live.
std::vector<double> latency_buckets() {
  return {0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,   0.25,  0.5,
          0.75,   1.0,   2.5,   5.0,   7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
}

}  // namespace

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  const size_t bucket = std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  ++counts_[bucket];
  sum_ += value;
  ++count_;
}

void Histogram::render(std::string& out, const std::string& name, const std::string& labels) const {
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    cumulative += counts_[i];
    const std::string le = i < bounds_.size() ? number(bounds_[i]) : "+Inf";
    out += name + "_bucket{" + labels + ",le=\"" + le + "\"} " + std::to_string(cumulative) + "\n";
  }
  out += name + "_sum{" + labels + "} " + number(sum_) + "\n";
  out += name + "_count{" + labels + "} " + std::to_string(count_) + "\n";
}

ServerMetrics::ServerMetrics(const std::string& model_name)
    : model_label_("model_name=\"" + escape_label(model_name) + "\""),
      ttft_(latency_buckets()),
      itl_(latency_buckets()),
      e2e_(latency_buckets()),
      queue_(latency_buckets()) {}

void ServerMetrics::set_model_name(const std::string& model_name) {
  std::lock_guard<std::mutex> lock(mutex_);
  model_label_ = "model_name=\"" + escape_label(model_name) + "\"";
}

void ServerMetrics::observe_time_to_first_token(double s) {
  std::lock_guard<std::mutex> lock(mutex_);
  ttft_.observe(s);
}
void ServerMetrics::observe_inter_token_latency(double s) {
  std::lock_guard<std::mutex> lock(mutex_);
  itl_.observe(s);
}
void ServerMetrics::observe_e2e_latency(double s) {
  std::lock_guard<std::mutex> lock(mutex_);
  e2e_.observe(s);
}
void ServerMetrics::observe_queue_time(double s) {
  std::lock_guard<std::mutex> lock(mutex_);
  queue_.observe(s);
}
void ServerMetrics::add_prompt_tokens(int64_t n) {
  std::lock_guard<std::mutex> lock(mutex_);
  prompt_tokens_ += n;
}
void ServerMetrics::add_generation_tokens(int64_t n) {
  std::lock_guard<std::mutex> lock(mutex_);
  generation_tokens_ += n;
}
void ServerMetrics::count_success(const std::string& finish_reason) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++success_[finish_reason];
}
void ServerMetrics::set_spec_decode(const SpeculativeMetrics& totals) {
  std::lock_guard<std::mutex> lock(mutex_);
  spec_ = totals;
}

void ServerMetrics::set_prefix_cache(const PrefixCacheMetrics& totals) {
  std::lock_guard<std::mutex> lock(mutex_);
  prefix_cache_ = totals;
}

void ServerMetrics::count_refusal(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++refused_[reason];
}

std::string ServerMetrics::render(const SchedulerGauges& g, int open_connections) const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string out;
  const std::string& l = model_label_;
  auto gauge = [&](const std::string& name, const char* help, double v) {
    header(out, name, "gauge", help);
    out += name + "{" + l + "} " + number(v) + "\n";
  };
  auto counter = [&](const std::string& name, const char* help, int64_t v) {
    header(out, name, "counter", help);
    out += name + "{" + l + "} " + std::to_string(v) + "\n";
  };
  auto histogram = [&](const std::string& name, const char* help, const Histogram& h) {
    header(out, name, "histogram", help);
    h.render(out, name, l);
  };
  gauge("tpserve:num_requests_running", "Requests being decoded (in the running batch).", g.num_running);
  gauge("tpserve:num_requests_waiting", "Requests waiting to be scheduled.", g.num_waiting);
  gauge("tpserve:kv_cache_usage_perc", "Fraction of KV cache blocks in use (1 = full).", g.kv_cache_usage);
  counter("tpserve:num_preemptions_total", "Sequences preempted (KV cache full); they are recomputed later.",
          g.num_preemptions);
  counter("tpserve:prompt_tokens_total", "Prompt tokens processed.", prompt_tokens_);
  counter("tpserve:prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache.",
          prefix_cache_.queried_tokens);
  counter("tpserve:prefix_cache_hits_total", "Prompt tokens whose KV the prefix cache held.",
          prefix_cache_.hit_tokens);
  counter("tpserve:generation_tokens_total", "Tokens generated.", generation_tokens_);
  header(out, "tpserve:request_success_total", "counter", "Requests finished, by finish reason.");
  for (const char* reason : {"stop", "length"}) {
    auto it = success_.find(reason);
    out += std::string("tpserve:request_success_total{") + l + ",finished_reason=\"" + reason + "\"} " +
           std::to_string(it == success_.end() ? 0 : it->second) + "\n";
  }
  counter("tpserve:spec_decode_num_drafts_total", "Speculative decoding: draft rounds.", spec_.drafts);
  counter("tpserve:spec_decode_num_draft_tokens_total", "Speculative decoding: draft tokens proposed.",
          spec_.draft_tokens);
  counter("tpserve:spec_decode_num_accepted_tokens_total", "Speculative decoding: draft tokens accepted.",
          spec_.accepted_tokens);
  header(out, "tpserve:spec_decode_num_accepted_tokens_per_pos_total", "counter",
         "Speculative decoding: verifications that accepted the draft at each position (0 = first draft).");
  for (size_t j = 0; j < spec_.accepted_at.size(); ++j)
    out += "tpserve:spec_decode_num_accepted_tokens_per_pos_total{" + l + ",position=\"" + std::to_string(j) +
           "\"} " + std::to_string(spec_.accepted_at[j]) + "\n";
  gauge("tpserve:spec_decode_mean_accepted_length",
        "Speculative decoding: tokens emitted per verification (accepted drafts + 1); 0 before any.",
        spec_.mean_accepted_length());
  gauge("tpserve:http_connections_open", "HTTP connections open (idle keep-alive ones included).",
        open_connections);
  header(out, "tpserve:requests_refused_total", "counter",
         "Requests and connections refused by a server limit, by reason (the error code).");
  for (const char* reason : {"unauthorized", "too_many_connections", "server_overloaded", "request_timeout",
                             "request_too_large", "limit_exceeded"}) {
    auto it = refused_.find(reason);
    out += std::string("tpserve:requests_refused_total{") + l + ",reason=\"" + reason + "\"} " +
           std::to_string(it == refused_.end() ? 0 : it->second) + "\n";
  }
  histogram("tpserve:time_to_first_token_seconds", "Time from arrival to the first generated token.", ttft_);
  histogram("tpserve:inter_token_latency_seconds", "Time between consecutive generated tokens.", itl_);
  histogram("tpserve:e2e_request_latency_seconds", "Time from arrival to the last token.", e2e_);
  histogram("tpserve:request_queue_time_seconds", "Time from arrival to the first schedule.", queue_);
  return out;
}

}  // namespace tpserve::serve
