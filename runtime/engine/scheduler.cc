#include "runtime/engine/scheduler.h"

#include <algorithm>
#include <utility>

#include "common/error.h"
#include "common/log.h"

namespace tpserve {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kNone: return "none";
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kAborted: return "abort";
  }
  return "?";
}

Scheduler::Scheduler(const SchedulerLimits& limits, int num_kv_blocks, int kv_block_size,
                     std::vector<int32_t> eos_token_ids)
    : limits_(limits), blocks_(num_kv_blocks, kv_block_size), eos_(std::move(eos_token_ids)) {}

void Scheduler::add(Request request) {
  const int prompt = static_cast<int>(request.prompt.size());
  TPS_CHECK(prompt > 0, "request ", request.id, ": empty prompt");
  TPS_CHECK(request.max_tokens >= 1, "request ", request.id, ": max_tokens must be >= 1");
  TPS_CHECK(prompt + request.max_tokens <= limits_.max_seq_len, "request ", request.id, ": prompt (", prompt,
            " tokens) + max_tokens (", request.max_tokens, ") exceeds max_seq_len ", limits_.max_seq_len);
  const int blocks = blocks_.blocks_for(prompt + request.max_tokens);
  TPS_CHECK(blocks <= limits_.max_blocks_per_seq && blocks <= blocks_.num_blocks(), "request ", request.id, ": needs ",
            blocks, " KV blocks; the cache has ", blocks_.num_blocks());
  auto seq = std::make_unique<Sequence>();
  seq->tokens = request.prompt;
  seq->request = std::move(request);
  waiting_.push_back(std::move(seq));
}

void Scheduler::abort(int64_t request_id) { aborted_.push_back(request_id); }

std::vector<TokenEvent> Scheduler::take_aborted() { return std::exchange(aborted_events_, {}); }

void Scheduler::preempt_newest() {
  auto& seq = running_.back();
  blocks_.release(seq->blocks);
  seq->num_cached = 0;  // recomputed from its tokens (prompt + generated so far) when readmitted
  ++preemptions_;
  log_debug("preempted request ", seq->request.id, " (KV cache full)");
  waiting_.push_front(std::move(seq));
  running_.pop_back();
}

std::optional<StepBatch> Scheduler::schedule() {
  for (int64_t id : aborted_) {
    auto match = [id](const std::unique_ptr<Sequence>& s) { return s->request.id == id; };
    if (auto it = std::find_if(running_.begin(), running_.end(), match); it != running_.end()) {
      blocks_.release((*it)->blocks);
      aborted_events_.push_back({id, -1, (*it)->num_generated, FinishReason::kAborted});
      running_.erase(it);
    } else if (auto w = std::find_if(waiting_.begin(), waiting_.end(), match); w != waiting_.end()) {
      blocks_.release((*w)->blocks);
      aborted_events_.push_back({id, -1, (*w)->num_generated, FinishReason::kAborted});
      waiting_.erase(w);
    }
  }
  aborted_.clear();

  last_.clear();
  int budget = limits_.max_step_tokens;
  // Running sequences first (decode, or the next chunk of a long prompt).
  for (size_t i = 0; i < running_.size() && budget > 0; ++i) {
    Sequence* s = running_[i].get();
    const int n = std::min(static_cast<int>(s->tokens.size()) - s->num_cached, budget);
    while (!blocks_.reserve(s->blocks, s->num_cached + n)) {
      const bool self = running_.back().get() == s;
      preempt_newest();
      if (self) break;
    }
    if (i >= running_.size() || running_[i].get() != s) break;  // s itself was preempted
    last_.push_back({s, n, s->num_cached + n == static_cast<int>(s->tokens.size())});
    budget -= n;
  }
  // Then admit waiting requests as prefills.
  while (!waiting_.empty() && budget > 0 && static_cast<int>(running_.size()) < limits_.max_batch) {
    Sequence* s = waiting_.front().get();
    const int n = std::min(static_cast<int>(s->tokens.size()) - s->num_cached, budget);
    if (!blocks_.reserve(s->blocks, s->num_cached + n)) break;
    if (!s->admitted) admitted_.push_back(s->request.id), s->admitted = true;
    running_.push_back(std::move(waiting_.front()));
    waiting_.pop_front();
    last_.push_back({s, n, s->num_cached + n == static_cast<int>(s->tokens.size())});
    budget -= n;
  }
  if (last_.empty()) return std::nullopt;

  StepBatch b;
  const int bs = blocks_.block_size();
  b.max_blocks_per_seq = 0;
  for (const auto& sc : last_) b.max_blocks_per_seq = std::max<int>(b.max_blocks_per_seq, sc.seq->blocks.size());
  b.query_start.push_back(0);
  for (const auto& sc : last_) {
    const Sequence& s = *sc.seq;
    for (int p = s.num_cached; p < s.num_cached + sc.num_tokens; ++p) {
      b.token_ids.push_back(s.tokens[p]);
      b.positions.push_back(p);
      b.slot_mapping.push_back(s.blocks[p / bs] * bs + p % bs);
    }
    b.query_start.push_back(static_cast<int32_t>(b.token_ids.size()));
    b.context_lens.push_back(s.num_cached + sc.num_tokens);
    std::vector<int32_t> row(s.blocks);
    row.resize(b.max_blocks_per_seq, 0);
    b.block_tables.insert(b.block_tables.end(), row.begin(), row.end());
    if (sc.samples) {
      b.sample_rows.push_back(b.query_start.back() - 1);
      b.sampling.push_back(s.request.sampling);
      b.sample_counters.push_back(static_cast<int64_t>(s.tokens.size()));
    }
  }
  return b;
}

FinishReason Scheduler::finish_reason(const Sequence& s, int32_t token) const {
  const auto& stop = s.request.stop_token_ids;
  if (std::find(stop.begin(), stop.end(), token) != stop.end()) return FinishReason::kStop;
  if (!s.request.ignore_eos && std::find(eos_.begin(), eos_.end(), token) != eos_.end()) return FinishReason::kStop;
  if (s.num_generated >= s.request.max_tokens) return FinishReason::kLength;
  if (static_cast<int>(s.tokens.size()) >= limits_.max_seq_len) return FinishReason::kLength;
  return FinishReason::kNone;
}

void Scheduler::finish(std::vector<std::unique_ptr<Sequence>>::iterator it) {
  blocks_.release((*it)->blocks);
  running_.erase(it);
}

std::vector<TokenEvent> Scheduler::complete(const StepResult& result) {
  std::vector<TokenEvent> events;
  std::vector<Sequence*> done;
  size_t row = 0;
  for (const auto& sc : last_) {
    Sequence& s = *sc.seq;
    s.num_cached += sc.num_tokens;
    if (!sc.samples) continue;
    TPS_CHECK(row < result.tokens.size(), "step result has ", result.tokens.size(), " tokens, expected more");
    const int32_t token = result.tokens[row++];
    s.tokens.push_back(token);
    ++s.num_generated;
    const FinishReason reason = finish_reason(s, token);
    events.push_back({s.request.id, token, s.num_generated - 1, reason});
    if (reason != FinishReason::kNone) done.push_back(&s);
  }
  for (Sequence* s : done) {
    auto it = std::find_if(running_.begin(), running_.end(), [s](const auto& p) { return p.get() == s; });
    if (it != running_.end()) finish(it);
  }
  last_.clear();
  return events;
}

}  // namespace tpserve
