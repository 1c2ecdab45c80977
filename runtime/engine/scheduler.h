// Scheduler: continuous batching on rank 0. Each step it decodes every running sequence (one token each),
// then admits waiting requests as prefill chunks while the token budget, max_batch and the KV cache allow;
// a sequence that needs a block when none is free preempts the newest running one (its KV is dropped and
// recomputed later; nothing is lost). It turns model results into per-request token events.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/engine/kv_block_allocator.h"
#include "runtime/engine/logit_adjuster.h"
#include "runtime/engine/token_constraint.h"
#include "runtime/model/step_batch.h"

namespace tpserve {

struct Request {
  int64_t id = 0;
  std::vector<int32_t> prompt;
  SamplingParams sampling;
  int max_tokens = 16;
  std::vector<int32_t> stop_token_ids;  // in addition to the model's EOS ids unless ignore_eos
  bool ignore_eos = false;
  // Log-probabilities of the generated tokens: -1 none; n >= 0 the drawn token's and the n most likely.
  int logprobs = -1;
  // Logit bias, penalties, min_tokens (logit_adjuster.h). A request with penalties is not speculated: its
  // rows' adjustments depend on every token before them.
  LogitProcessing processing;
  // Structured output (token_constraint.h): the tokens it allows next, and the request's stop tokens once
  // the text is whole. One per request (it holds the request's state); a constrained request is not
  // speculated, and it stops when the rule is finished.
  std::shared_ptr<TokenConstraint> constraint;
};

// kStop: a stop token (EOS, stop_token_ids) ended the request; it is not part of the text. kComplete: the
// structured output rule is finished (nothing may follow); the token is the text's last, and the answer's
// finish_reason is "stop" too.
enum class FinishReason { kNone, kStop, kLength, kAborted, kComplete };
const char* finish_reason_name(FinishReason r);

struct TokenEvent {
  int64_t request_id = 0;
  int32_t token = 0;
  int index = 0;  // 0 for the first generated token
  FinishReason finish = FinishReason::kNone;
  std::optional<TokenLogprobs> logprobs;  // when the request asked for them
};

// What one schedule() put in the step: sequences decoding their next token, and prefill chunks (a prompt,
// its last chunk included, or a preempted sequence being recomputed).
struct StepMix {
  int decode_seqs = 0;
  int prefill_seqs = 0;
  int prefill_tokens = 0;
  bool has_prefill() const { return prefill_seqs > 0; }
};

struct SchedulerLimits {
  int max_batch = 16;         // running sequences
  int max_step_tokens = 512;  // tokens per step the model takes (decode rows + prefill chunks)
  int max_seq_len = 4096;     // prompt + generated
  int max_blocks_per_seq = 256;
  // Prefill chunks take at most this many tokens of a step in all (runtime.max_num_batched_tokens), beside
  // the decode rows (1 + k a sequence under speculation), within max_step_tokens. 0: max_step_tokens.
  int max_prefill_step_tokens = 0;
  // Automatic prefix caching (runtime.enable_prefix_caching): a request whose first full blocks of tokens
  // another one computed takes their KV instead of computing it again (docs/serving.md, "Prefix caching").
  bool prefix_caching = false;
  // The most top log-probabilities a request may ask for (OpenAI's 20, at most the sampler's candidates).
  int max_logprobs = 20;
  // Logit adjustments a step may carry (the model is sized for as many); a sequence whose rows would take
  // more than what is left waits for a later step, and a request that could need more than all is refused.
  int max_logit_adjustments = 65536;
  int32_t vocab_size = 0;  // logit_bias and stop token ids must be below it (0: unchecked)
};

// Prefix caching counters, in tokens, over requests' first admissions (vLLM's prefix_cache_queries/hits).
struct PrefixCacheMetrics {
  int64_t queried_tokens = 0;  // prompt tokens of requests admitted
  int64_t hit_tokens = 0;      // of them, tokens whose KV was found cached
};

// A request leaving the waiting queue for the first time.
struct Admission {
  int64_t request_id = 0;
  int cached_tokens = 0;  // prompt tokens whose KV came from the prefix cache
};

// Speculative decoding: k drafts per sequence and step, verified by the main model in the same step.
// Drafts come from the model's MTP head (they stay on the device: token ids point into its draft table) or,
// in tests, from a script that proposes tokens given the request and its tokens so far.
using DraftScript =
    std::function<std::vector<int32_t>(int64_t request_id, const std::vector<int32_t>& tokens, int k)>;
using DeviceDraftToken = std::function<int32_t(int slot, int j)>;
struct SpeculativeSettings {
  int num_tokens = 0;             // k (0: no speculation)
  DeviceDraftToken device_draft;  // MTP: token id standing for draft j of a slot
  DraftScript script;             // tests: literal drafts
};

struct SpeculativeMetrics {
  int64_t drafts = 0;                    // verification groups (one per sequence and step)
  int64_t draft_tokens = 0;              // drafts proposed
  int64_t accepted_tokens = 0;           // drafts accepted
  std::vector<int64_t> accepted_at;      // [k]: groups that accepted the draft at position j
  double mean_accepted_length() const {  // tokens emitted per verification (accepted + 1)
    return drafts ? 1.0 + static_cast<double>(accepted_tokens) / static_cast<double>(drafts) : 0.0;
  }
};

class Scheduler {
 public:
  Scheduler(const SchedulerLimits& limits, int num_kv_blocks, int kv_block_size,
            std::vector<int32_t> eos_token_ids, SpeculativeSettings speculative = {});

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
  // The requests that left the waiting queue for the first time since the last call (queue time, cached
  // prompt tokens).
  std::vector<Admission> take_admitted() { return std::exchange(admitted_, {}); }

  int num_running() const { return static_cast<int>(running_.size()); }
  int num_waiting() const { return static_cast<int>(waiting_.size()); }
  // Of them, those the last schedule() held back for a block another request computed in that step: they
  // are taken next step (they count as running for the batch's places, not as queued for room).
  int num_deferred() const { return deferred_; }
  double kv_usage() const { return blocks_.usage(); }
  int64_t preemptions() const { return preemptions_; }
  const SpeculativeMetrics& speculative_metrics() const { return spec_metrics_; }
  const PrefixCacheMetrics& prefix_cache_metrics() const { return prefix_metrics_; }
  // Forgets every cached prefix: run_batch() wrote KV blocks behind the scheduler's back.
  void reset_prefix_cache() { blocks_.reset(); }
  // The mix of the batch the last schedule() returned.
  const StepMix& last_step_mix() const { return last_mix_; }
  const SchedulerLimits& limits() const { return limits_; }
  // Tokens the KV cache holds in all (one sequence can never be longer).
  int64_t kv_capacity_tokens() const {
    return static_cast<int64_t>(blocks_.num_blocks()) * blocks_.block_size();
  }
  // The most tokens (prompt + max_tokens) add() takes for one request: max_seq_len, and the blocks one
  // sequence may hold less the room speculation keeps for the drafts of its last step (2k tokens).
  int64_t max_request_tokens() const;

 private:
  struct Sequence {
    Request request;
    std::vector<int32_t> tokens;  // prompt + generated
    int num_generated = 0;
    int num_cached = 0;     // tokens whose KV is in the cache
    int num_committed = 0;  // leading blocks entered in the prefix cache
    bool admitted = false;  // left the waiting queue at least once
    std::vector<int32_t> blocks;
    int slot = -1;            // draft-table slot (MTP)
    bool has_drafts = false;  // MTP drafts for this sequence wait in the draft table
    LogitAdjuster adjuster;
  };
  struct Scheduled {
    Sequence* seq;
    int num_tokens;
    bool samples;
    int drafts = 0;  // rows after the first that verify drafts
  };
  bool speculating() const { return spec_.num_tokens > 0; }
  // Drafts come from the MTP head on the device (not from a script).
  bool mtp_drafting() const { return speculating() && static_cast<bool>(spec_.device_draft); }
  int drafts_for(const Sequence& s) const;
  // Logit adjustments the sequence's rows may carry this step if it runs `rows` sampled rows.
  static int adjustments_for(const Sequence& s, int rows) { return rows * s.adjuster.max_row_entries(); }
  // Lets go of everything the sequence holds: its blocks (its KV is gone: nothing cached, nothing
  // committed) and its draft-table slot.
  void release(Sequence& s);
  // Prefix caching: takes the cached blocks of a sequence's leading tokens before its first chunk.
  int take_cached_prefix(Sequence& s);
  // Prefix caching: where a sequence already in this step computes (part of) the block after `s`'s cached
  // ones, with the same tokens up to its end (and the next token, which MTP's key holds), how many leading
  // blocks `s` can take from the cache after this step (at least its cached ones); else 0. Then `s` waits
  // a step and takes them instead of computing the same prompt again (n choices, a batch of prompts with
  // one system prompt).
  int blocks_computed_for(const Sequence& s) const;

  void preempt_newest();
  // Structured output: the mask of the tokens sampled row `row` of `s` may draw (its rule's, and its stop
  // tokens once the text is whole), appended to the batch.
  void append_token_mask(const Sequence& s, int32_t row, StepBatch& b) const;
  // Tells the rule the token `s` generated; the reason it finishes then (kComplete once the rule is
  // finished).
  FinishReason advance_constraint(Sequence& s, int32_t token, FinishReason reason) const;
  FinishReason finish_reason(const Sequence& s, int32_t token) const;
  void finish(std::vector<std::unique_ptr<Sequence>>::iterator it);

  SchedulerLimits limits_;
  SpeculativeSettings spec_;  // before blocks_: the prefix cache's key depends on it
  KvBlockAllocator blocks_;
  std::vector<int32_t> eos_;
  std::deque<std::unique_ptr<Sequence>> waiting_;
  std::vector<std::unique_ptr<Sequence>> running_;  // admission order
  std::vector<Scheduled> last_;
  StepMix last_mix_;
  std::vector<int64_t> aborted_;
  std::vector<TokenEvent> aborted_events_;
  std::vector<Admission> admitted_;
  int64_t preemptions_ = 0;
  int deferred_ = 0;  // num_deferred()
  SpeculativeMetrics spec_metrics_;
  PrefixCacheMetrics prefix_metrics_;
  std::vector<int> free_slots_;
};

}  // namespace tpserve
