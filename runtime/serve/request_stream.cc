#include "runtime/serve/request_stream.h"

namespace tpserve::serve {

void StreamUpdate::merge(StreamUpdate&& later) {
  text += later.text;
  token_ids.insert(token_ids.end(), later.token_ids.begin(), later.token_ids.end());
  logprobs.insert(logprobs.end(), std::make_move_iterator(later.logprobs.begin()),
                  std::make_move_iterator(later.logprobs.end()));
  if (later.finished) {
    finished = true;
    finish_reason = std::move(later.finish_reason);
    prompt_tokens = later.prompt_tokens;
    completion_tokens = later.completion_tokens;
    cached_tokens = later.cached_tokens;
    error = std::move(later.error);
    refused = later.refused;
  }
}

void RequestStream::publish(StreamUpdate update) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (has_pending_) {
      pending_.merge(std::move(update));
    } else {
      pending_ = std::move(update);
      has_pending_ = true;
    }
  }
  ready_.notify_one();
}

bool RequestStream::next(StreamUpdate& out, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!ready_.wait_for(lock, timeout, [this] { return has_pending_; })) return false;
  out = std::move(pending_);
  pending_ = StreamUpdate();
  has_pending_ = false;
  return true;
}

}  // namespace tpserve::serve
