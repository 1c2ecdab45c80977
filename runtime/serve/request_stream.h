// RequestStream: the channel from the engine loop to the HTTP thread serving one request. The loop
// publishes updates (new text and token ids, then the end with finish reason and usage); the HTTP thread
// takes them, merged when it fell behind, and cancels the request when its client goes away.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/serve/logprobs_json.h"

namespace tpserve::serve {

struct StreamUpdate {
  std::string text;                    // new text: always valid UTF-8, never part of a stop string
  std::vector<int32_t> token_ids;      // new generated tokens
  std::vector<TokenLogprob> logprobs;  // theirs, when the request asked (one per token id)
  bool finished = false;
  std::string finish_reason;  // stop | length | abort (when finished)
  int prompt_tokens = 0;      // usage (when finished)
  int completion_tokens = 0;
  int cached_tokens = 0;  // prompt tokens whose KV came from the prefix cache
  std::string error;      // set when the request failed (finished too)
  bool refused = false;   // the error is the engine refusing the request (Scheduler::add): a 400, not a 500

  // Appends a later update to this one.
  void merge(StreamUpdate&& later);
};

class RequestStream {
 public:
  // Engine loop side.
  void publish(StreamUpdate update);
  bool cancelled() const { return cancelled_.load(std::memory_order_acquire); }

  // HTTP side: waits up to `timeout` for updates; false when none came.
  bool next(StreamUpdate& out, std::chrono::milliseconds timeout);
  // The client is gone: the engine loop aborts the request at its next step.
  void cancel() { cancelled_.store(true, std::memory_order_release); }

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  StreamUpdate pending_;
  bool has_pending_ = false;
  std::atomic<bool> cancelled_{false};
};

}  // namespace tpserve::serve
