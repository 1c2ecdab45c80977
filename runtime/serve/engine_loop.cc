#include "runtime/serve/engine_loop.h"

#include <algorithm>

#include "common/error.h"
#include "common/log.h"

namespace tpserve::serve {
namespace {

double seconds_between(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace

RequestLimits request_limits_for(Engine& engine, const Tokenizer* tokenizer, const ServerConfig& server) {
  RequestLimits limits;
  limits.tokenizer = tokenizer;
  limits.model_name = engine.source().name;
  limits.vocab_size = engine.spec().vocab_size;
  const Scheduler& scheduler = engine.scheduler();
  limits.max_context_tokens = scheduler.max_request_tokens();
  limits.defaults = engine.source().generation;
  if (limits.defaults.repetition_penalty != 1.0)
    log_warn("generation_config.json sets repetition_penalty ", limits.defaults.repetition_penalty,
             ": every request that does not send its own is penalised, so its steps run without CUDA graphs ",
             "and without speculation (docs/serving.md, \"Logit bias, penalties and min_tokens\"); requests ",
             "may send \"repetition_penalty\": 1");
  limits.max_prompt_tokens = server.max_prompt_tokens;
  limits.max_output_tokens = server.max_output_tokens;
  limits.max_stop_sequences = server.max_stop_sequences;
  limits.max_stop_string_bytes = server.max_stop_string_bytes;
  limits.max_queued_requests = server.max_queued_requests;
  limits.max_logprobs = scheduler.limits().max_logprobs;
  limits.parse_reasoning = server.reasoning_parser == ReasoningParser::kQwen3;
  limits.parse_tool_calls = server.tool_call_parser == ToolCallParser::kHermes;
  if (tokenizer != nullptr) limits.grammars = std::make_shared<StructuredGrammars>(*tokenizer);
  return limits;
}

EngineLoop::EngineLoop(Engine& engine, const Tokenizer* tokenizer, ServerMetrics& metrics, int max_waiting)
    : engine_(engine),
      tokenizer_(tokenizer),
      metrics_(metrics),
      max_waiting_(max_waiting),
      free_batch_places_(engine.scheduler().limits().max_batch) {}

Submission EngineLoop::submit(GenerationJob job) {
  auto stream = std::make_shared<RequestStream>();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (draining_) return {nullptr, Submission::Refusal::kDraining};
    // waiting_ is the scheduler's queue at the last step plus what was submitted since (refresh_gauges
    // recounts both under this lock), so the check and the increment are one step for every submitter.
    // Submissions that the next step will take into free places of the batch do not wait: a burst into an
    // idle server is not refused.
    if (max_waiting_ > 0 && waiting_.load() >= max_waiting_ + free_batch_places_)
      return {nullptr, Submission::Refusal::kQueueFull};
    incoming_.push_back({next_id_++, std::move(job), stream});
    waiting_.fetch_add(1);
  }
  wake_.notify_one();
  return {stream, Submission::Refusal::kNone};
}

void EngineLoop::drain() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    draining_ = true;
  }
  wake_.notify_one();
}

SchedulerGauges EngineLoop::gauges() const {
  return {running_.load(), waiting_.load(), kv_usage_.load(), preemptions_.load()};
}

void EngineLoop::refresh_gauges() {
  Scheduler& s = engine_.scheduler();
  std::lock_guard<std::mutex> lock(mutex_);
  // Requests held back a step for a block another computes (Scheduler::num_deferred) are taken next step:
  // they count as running, not queued for room, and their places in the batch are theirs.
  const int running = s.num_running() + s.num_deferred();
  running_ = running;
  const int queued = s.num_waiting() - s.num_deferred();
  waiting_ = queued + static_cast<int>(incoming_.size());
  // A queue in the scheduler beside free places means the KV cache holds no more: none free then.
  free_batch_places_ = queued > 0 ? 0 : std::max(0, s.limits().max_batch - running);
  kv_usage_ = s.kv_usage();
  preemptions_ = s.preemptions();
}

void EngineLoop::admit(Submitted s) {
  Request r;
  r.id = s.id;
  r.prompt = s.job.prompt;
  r.sampling = s.job.sampling;
  r.max_tokens = s.job.max_tokens;
  r.stop_token_ids = s.job.stop_token_ids;
  r.ignore_eos = s.job.ignore_eos;
  r.logprobs = s.job.logprobs;
  r.processing = s.job.processing;
  if (s.job.structured) r.constraint = s.job.structured->start(s.job.structured_begin_after);
  try {
    engine_.scheduler().add(std::move(r));
  } catch (const Error& e) {  // validation upstream makes this rare: answer the client, keep serving
    StreamUpdate u;
    u.finished = true;
    u.finish_reason = "abort";
    u.error = e.what();
    u.refused = true;
    s.stream->publish(std::move(u));
    return;
  }
  Active a{s.stream, std::nullopt, StopStringMatcher(s.job.stop)};
  if (tokenizer_ != nullptr) a.detokenizer.emplace(*tokenizer_, s.job.skip_special_tokens);
  a.prompt_tokens = static_cast<int>(s.job.prompt.size());
  a.min_tokens = s.job.processing.min_tokens;
  a.arrival = s.job.arrival;
  active_.emplace(s.id, std::move(a));
}

void EngineLoop::finish(int64_t id, Active& a, StreamUpdate update, const std::string& reason) {
  update.finished = true;
  update.finish_reason = reason;
  update.prompt_tokens = a.prompt_tokens;
  update.completion_tokens = a.completion_tokens;
  update.cached_tokens = a.cached_tokens;
  if (reason != "abort") {
    metrics_.observe_e2e_latency(seconds_between(a.arrival, std::chrono::steady_clock::now()));
    metrics_.count_success(reason);
  }
  a.stream->publish(std::move(update));
  active_.erase(id);
}

void EngineLoop::handle(const TokenEvent& e) {
  auto it = active_.find(e.request_id);
  if (it == active_.end()) return;  // finished already (stop string) and aborted since
  Active& a = it->second;
  if (e.finish == FinishReason::kAborted) {
    finish(e.request_id, a, {}, "abort");
    return;
  }
  const auto now = std::chrono::steady_clock::now();
  if (a.completion_tokens == 0) {
    metrics_.observe_time_to_first_token(seconds_between(a.arrival, now));
    metrics_.add_prompt_tokens(a.prompt_tokens);
  } else {
    metrics_.observe_inter_token_latency(seconds_between(a.last_token, now));
  }
  a.last_token = now;
  ++a.completion_tokens;
  metrics_.add_generation_tokens(1);

  StreamUpdate u;
  u.token_ids.push_back(e.token);
  if (e.logprobs) u.logprobs.push_back(describe_logprobs(e.token, *e.logprobs, tokenizer_));
  std::string text;
  if (a.detokenizer) {
    // The token that ends the request with "stop" (EOS or a stop_token_id) is not part of the text.
    if (e.finish != FinishReason::kStop) text = a.detokenizer->push(e.token);
    if (e.finish != FinishReason::kNone) text += a.detokenizer->finish();
  }
  u.text = a.stops.push(text, e.index >= a.min_tokens);  // as EOS: from generated token number min_tokens on
  if (a.stops.stopped()) {
    if (e.finish == FinishReason::kNone) engine_.scheduler().abort(e.request_id);  // free its KV now
    finish(e.request_id, a, std::move(u), "stop");
    return;
  }
  if (e.finish != FinishReason::kNone) {
    u.text += a.stops.flush();
    finish(e.request_id, a, std::move(u), e.finish == FinishReason::kLength ? "length" : "stop");
    return;
  }
  a.stream->publish(std::move(u));
}

void EngineLoop::fail_all(const std::string& message) {
  std::deque<Submitted> incoming;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    incoming.swap(incoming_);
    draining_ = true;
  }
  StreamUpdate u;
  u.finished = true;
  u.finish_reason = "abort";
  u.error = message;
  for (auto& s : incoming) s.stream->publish(u);
  for (auto& [id, a] : active_) a.stream->publish(u);
  active_.clear();
}

void EngineLoop::run() {
  Scheduler& scheduler = engine_.scheduler();
  try {
    for (;;) {
      std::deque<Submitted> incoming;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return !incoming_.empty() || draining_ || scheduler.has_work(); });
        incoming.swap(incoming_);
        if (incoming.empty() && draining_ && !scheduler.has_work() && active_.empty()) break;
      }
      for (auto& s : incoming) admit(std::move(s));
      for (auto& [id, a] : active_) {
        if (a.stream->cancelled() && !a.abort_sent) {
          scheduler.abort(id);
          a.abort_sent = true;
        }
      }
      if (scheduler.has_work()) {
        const auto scheduled_at = std::chrono::steady_clock::now();
        const std::vector<TokenEvent> events = engine_.step();
        metrics_.set_spec_decode(scheduler.speculative_metrics());  // running totals, once a step
        metrics_.set_prefix_cache(scheduler.prefix_cache_metrics());
        for (const Admission& a :
             scheduler.take_admitted())  // before handle(): a request may finish in its first step
          if (auto it = active_.find(a.request_id); it != active_.end()) {
            metrics_.observe_queue_time(seconds_between(it->second.arrival, scheduled_at));
            it->second.cached_tokens = a.cached_tokens;
          }
        refresh_gauges();  // before the updates go out: a client that got its last token sees itself gone
        for (const TokenEvent& e : events) handle(e);
      }
      if (!scheduler.has_work() && !active_.empty()) {
        // Every admitted request ends with an event; one left over would wait forever: end it loudly.
        log_error("engine loop: ", active_.size(), " request(s) left without scheduler work; ending them");
        while (!active_.empty()) finish(active_.begin()->first, active_.begin()->second, {}, "abort");
      }
      refresh_gauges();
    }
  } catch (const std::exception& e) {
    log_error("engine loop failed: ", e.what());
    fail_all(std::string("the engine failed: ") + e.what());
    throw;
  }
  refresh_gauges();
}

}  // namespace tpserve::serve
