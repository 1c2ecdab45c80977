// EngineLoop: on rank 0, the one thread that owns the Engine. HTTP threads submit() validated jobs; the
// loop admits them to the scheduler, steps the engine while there is work (and sleeps on a condition
// variable when there is none), turns each request's tokens into text (incremental detokenization, stop
// strings held back and cut), publishes updates to the request's stream, records metrics, and aborts
// requests whose client went away at the next step. drain() stops admission; run() returns once every
// admitted request has finished.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "runtime/engine/engine.h"
#include "runtime/serve/generation_job.h"
#include "runtime/serve/incremental_detokenizer.h"
#include "runtime/serve/openai_request.h"
#include "runtime/serve/request_stream.h"
#include "runtime/serve/server_metrics.h"
#include "runtime/serve/stop_string_matcher.h"
#include "runtime/serve/tokenizer.h"

namespace tpserve::serve {

// What request validation needs to know of the engine (model name, vocabulary, context, defaults) and the
// server's per-request limits.
RequestLimits request_limits_for(Engine& engine, const Tokenizer* tokenizer, const ServerConfig& server);

// What submit() did with a job: accepted (stream set) or refused, and why.
struct Submission {
  enum class Refusal { kNone, kDraining, kQueueFull };
  std::shared_ptr<RequestStream> stream;  // null when refused
  Refusal refusal = Refusal::kNone;
};

class EngineLoop {
 public:
  // tokenizer may be null (token ids only: text stays empty). max_waiting: jobs waiting to be scheduled
  // (submitted or queued in the scheduler, preempted ones included, less the batch's free places) beyond
  // which submit() refuses; 0 = no limit.
  EngineLoop(Engine& engine, const Tokenizer* tokenizer, ServerMetrics& metrics, int max_waiting = 0);

  // Thread-safe. Refused once draining, or when max_waiting jobs already wait (the caller answers 503).
  Submission submit(GenerationJob job);
  // Runs on the engine's thread until drain() and every admitted request has finished. An engine failure
  // fails every open request and is rethrown.
  void run();
  // Thread-safe: stop admitting; run() returns when the requests already admitted are done.
  void drain();
  bool draining() const { return draining_.load(); }

  // Thread-safe snapshot, refreshed every step.
  SchedulerGauges gauges() const;

 private:
  struct Active {
    std::shared_ptr<RequestStream> stream;
    std::optional<IncrementalDetokenizer> detokenizer;
    StopStringMatcher stops;
    int prompt_tokens = 0;
    int completion_tokens = 0;
    int cached_tokens = 0;  // of the prompt, from the prefix cache
    int min_tokens = 0;     // stop strings count in the text of generated token number min_tokens on
    std::chrono::steady_clock::time_point arrival, last_token;
    bool abort_sent = false;
  };
  struct Submitted {
    int64_t id;
    GenerationJob job;
    std::shared_ptr<RequestStream> stream;
  };

  void admit(Submitted s);
  void handle(const TokenEvent& event);
  void finish(int64_t id, Active& a, StreamUpdate update, const std::string& reason);
  void fail_all(const std::string& message);
  void refresh_gauges();

  Engine& engine_;
  const Tokenizer* tokenizer_;
  ServerMetrics& metrics_;
  const int max_waiting_;

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Submitted> incoming_;
  int64_t next_id_ = 1;
  std::atomic<bool> draining_{false};

  std::unordered_map<int64_t, Active> active_;  // the loop thread's own
  std::atomic<int> running_{0}, waiting_{0};
  int free_batch_places_ = 0;  // under mutex_: places of the batch the next step can fill (refresh_gauges)
  std::atomic<double> kv_usage_{0};
  std::atomic<int64_t> preemptions_{0};
};

}  // namespace tpserve::serve
