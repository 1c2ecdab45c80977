// Scripted drafts at a set acceptance rate, for measuring what speculative decoding gains as a function of
// how often drafts are right, whatever the weights (random weights make real MTP drafts useless).
//
// A reference run without speculation records every request's greedy continuation (prompts are a function
// of (seed, concurrency, round, request), so a key (concurrency, round, request id) names it). The script
// then proposes the reference's next k tokens, each replaced by a wrong token with probability
// 1 - acceptance (decided once per (request, position), from a seeded hash). Greedy verification accepts a
// draft when it equals the main model's argmax, so a right draft is accepted unless the speculative step's
// numerics part from the reference's at a near-tie; tp_decode reports the acceptance actually measured.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "runtime/engine/scheduler.h"

namespace tpserve::bench {

// The greedy continuations of a reference run: generated tokens per (concurrency, round, request id).
class ReferenceContinuations {
 public:
  explicit ReferenceContinuations(int vocab) : vocab_(vocab) {}
  int vocab() const { return vocab_; }
  void add(int concurrency, int round, int64_t request_id, std::vector<int32_t> tokens);
  // nullptr when that request was not run.
  const std::vector<int32_t>* find(int concurrency, int round, int64_t request_id) const;
  bool empty() const { return by_key_.empty(); }

 private:
  int vocab_;
  std::map<std::tuple<int, int, int64_t>, std::vector<int32_t>> by_key_;
};

class ScriptedDraftSource {
 public:
  // prompt_len: tokens of every prompt (tp_decode's --input-len). A wrong draft is (right + 1) % vocab.
  ScriptedDraftSource(std::shared_ptr<const ReferenceContinuations> reference, double acceptance,
                      int prompt_len, uint64_t seed);
  // The run the next steps belong to (tp_decode sets it before each run).
  void set_run(int concurrency, int round);
  // Draft j of a request whose sequence holds `tokens` (prompt + generated): the reference token at
  // generated position (tokens - prompt_len + j), or a wrong one. Past the reference (or without one): 0.
  std::vector<int32_t> propose(int64_t request_id, const std::vector<int32_t>& tokens, int k) const;
  // Whether the draft at this generated position is made right (exposed for tests).
  bool right_at(int64_t request_id, int position) const;
  // A DraftScript calling propose(); this object must outlive it.
  DraftScript script() const;

 private:
  std::shared_ptr<const ReferenceContinuations> reference_;
  double acceptance_;
  int prompt_len_;
  uint64_t seed_;
  int concurrency_ = 0, round_ = 0;
};

}  // namespace tpserve::bench
