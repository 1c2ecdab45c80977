// Scheduler: continuous batching on rank 0. Each step it decodes every running sequence (one token each),
// then admits waiting requests as prefill chunks while the token budget, max_batch and the KV cache allow;
// a sequence that needs a block when none is free preempts the newest running one (its KV is dropped and
// recomputed later; nothing is lost). It turns model results into per-request token events.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/engine/kv_block_allocator.h"
#include "runtime/model/step_batch.h"

namespace tpserve {

struct Request {
  int64_t id = 0;
  std::vector<int32_t> prompt;
  SamplingParams sampling;
  int max_tokens = 16;
  std::vector<int32_t> stop_token_ids;  // in addition to the model's EOS ids unless ignore_eos
  bool ignore_eos = false;
};

enum class FinishReason { kNone, kStop, kLength, kAborted };
const char* finish_reason_name(FinishReason r);

struct TokenEvent {
  int64_t request_id = 0;
  int32_t token = 0;
  int index = 0;  // 0 for the first generated token
  FinishReason finish = FinishReason::kNone;
};

struct SchedulerLimits {
  int max_batch = 16;        // running sequences
  int max_step_tokens = 512; // tokens per step (decode rows + prefill chunks)
  int max_seq_len = 4096;    // prompt + generated
  int max_blocks_per_seq = 256;
};

class Scheduler {
 public:
  Scheduler(const SchedulerLimits& limits, int num_kv_blocks, int kv_block_size, std::vector<int32_t> eos_token_ids);

  // Throws tpserve::Error for a request that can never run (empty prompt, too long, bad max_tokens).
  void add(Request request);
  // Frees the request's sequence at the next step boundary (client gone).
  void abort(int64_t request_id);

  bool has_work() const { return !running_.empty() || !waiting_.empty(); }
  // The next step's batch, or nullopt when there is nothing to run.
  std::optional<StepBatch> schedule();
  // Applies the sampled tokens of the batch schedule() returned; returns the tokens emitted.
  std::vector<TokenEvent> complete(const StepResult& result);
  // Events for requests aborted since the last call.
  std::vector<TokenEvent> take_aborted();
  // Ids of the requests that left the waiting queue for the first time since the last call (queue time).
  std::vector<int64_t> take_admitted() { return std::exchange(admitted_, {}); }

  int num_running() const { return static_cast<int>(running_.size()); }
  int num_waiting() const { return static_cast<int>(waiting_.size()); }
  double kv_usage() const { return blocks_.usage(); }
  int64_t preemptions() const { return preemptions_; }
  const SchedulerLimits& limits() const { return limits_; }
  // Tokens the KV cache holds in all (one sequence can never be longer).
  int64_t kv_capacity_tokens() const { return static_cast<int64_t>(blocks_.num_blocks()) * blocks_.block_size(); }

 private:
  struct Sequence {
    Request request;
    std::vector<int32_t> tokens;  // prompt + generated
    int num_generated = 0;
    int num_cached = 0;           // tokens whose KV is in the cache
    bool admitted = false;        // left the waiting queue at least once
    std::vector<int32_t> blocks;
  };
  struct Scheduled {
    Sequence* seq;
    int num_tokens;
    bool samples;
  };

  void preempt_newest();
  FinishReason finish_reason(const Sequence& s, int32_t token) const;
  void finish(std::vector<std::unique_ptr<Sequence>>::iterator it);

  SchedulerLimits limits_;
  KvBlockAllocator blocks_;
  std::vector<int32_t> eos_;
  std::deque<std::unique_ptr<Sequence>> waiting_;
  std::vector<std::unique_ptr<Sequence>> running_;  // admission order
  std::vector<Scheduled> last_;
  std::vector<int64_t> aborted_;
  std::vector<TokenEvent> aborted_events_;
  std::vector<int64_t> admitted_;
  int64_t preemptions_ = 0;
};

}  // namespace tpserve
