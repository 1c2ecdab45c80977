#include "runtime/engine/scheduler.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "common/error.h"
#include "common/log.h"

namespace tpserve {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kNone:
      return "none";
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kAborted:
      return "abort";
    case FinishReason::kComplete:
      return "complete";
  }
  return "?";
}

Scheduler::Scheduler(const SchedulerLimits& limits, int num_kv_blocks, int kv_block_size,
                     std::vector<int32_t> eos_token_ids, SpeculativeSettings speculative)
    : limits_(limits),
      spec_(std::move(speculative)),
      blocks_(num_kv_blocks, kv_block_size,
              !limits.prefix_caching ? PrefixCacheKey::kNone
              // The MTP draft layer's KV at a block's last position was computed with the next token.
              : mtp_drafting() ? PrefixCacheKey::kBlockAndNextToken
                               : PrefixCacheKey::kBlockTokens),
      eos_(std::move(eos_token_ids)) {
  TPS_CHECK(!speculating() || spec_.device_draft || spec_.script,
            "speculative decoding needs a draft source");
  spec_metrics_.accepted_at.assign(spec_.num_tokens, 0);
  for (int s = limits_.max_batch - 1; s >= 0; --s) free_slots_.push_back(s);
}

int64_t Scheduler::max_request_tokens() const {
  const int64_t blocks = std::min(limits_.max_blocks_per_seq, blocks_.num_blocks());
  return std::min<int64_t>(limits_.max_seq_len, blocks * blocks_.block_size() - 2 * spec_.num_tokens);
}

void Scheduler::add(Request request) {
  const int64_t prompt = static_cast<int64_t>(request.prompt.size());
  TPS_CHECK(prompt > 0, "request ", request.id, ": empty prompt");
  TPS_CHECK(request.max_tokens >= 1, "request ", request.id, ": max_tokens must be >= 1");
  TPS_CHECK(request.logprobs >= -1 && request.logprobs <= limits_.max_logprobs, "request ", request.id, ": ",
            request.logprobs, " top log-probabilities asked, at most ", limits_.max_logprobs);
  const int64_t total = prompt + request.max_tokens;  // 64 bits: max_tokens may be near INT_MAX
  TPS_CHECK(total <= limits_.max_seq_len, "request ", request.id, ": prompt (", prompt,
            " tokens) + max_tokens (", request.max_tokens, ") exceeds max_seq_len ", limits_.max_seq_len);
  // Speculation reserves room for the drafts of the last step too (2k: verified rows + MTP draft steps).
  const int blocks = blocks_.blocks_for(static_cast<int>(total) + 2 * spec_.num_tokens);
  TPS_CHECK(total <= max_request_tokens(), "request ", request.id, ": needs ", blocks,
            " KV blocks (prompt + max_tokens + ", 2 * spec_.num_tokens,
            " tokens for speculation's drafts); one sequence may hold ",
            std::min(limits_.max_blocks_per_seq, blocks_.num_blocks()), " (", max_request_tokens(),
            " tokens of prompt + max_tokens)");
  auto seq = std::make_unique<Sequence>();
  if (request.processing.any()) {
    const LogitProcessing& p = request.processing;
    TPS_CHECK(p.repetition_penalty >= kMinRepetitionPenalty &&
                  p.repetition_penalty <= kMaxRepetitionPenalty && std::isfinite(p.frequency_penalty) &&
                  std::isfinite(p.presence_penalty) && p.min_tokens >= 0,
              "request ", request.id, ": repetition_penalty ", p.repetition_penalty, " frequency_penalty ",
              p.frequency_penalty, " presence_penalty ", p.presence_penalty, " min_tokens ", p.min_tokens);
    auto in_vocab = [&](int32_t t) { return t >= 0 && (limits_.vocab_size == 0 || t < limits_.vocab_size); };
    for (const auto& [token, bias] : p.logit_bias)
      TPS_CHECK(in_vocab(token) && std::isfinite(bias), "request ", request.id, ": logit_bias of token ",
                token, " is ", bias, " (vocabulary ", limits_.vocab_size, ")");
    // min_tokens masks the model's EOS ids whatever ignore_eos says (vLLM's), and the stop_token_ids; ids
    // beyond the vocabulary cannot be drawn anyway.
    std::vector<int32_t> stops;
    for (int32_t t : request.stop_token_ids) {
      TPS_CHECK(in_vocab(t), "request ", request.id, ": stop token id ", t, " is outside the vocabulary (",
                limits_.vocab_size, ")");
      stops.push_back(t);
    }
    for (int32_t t : eos_)
      if (in_vocab(t)) stops.push_back(t);
    seq->adjuster = LogitAdjuster(p, request.prompt, stops);
    // The most a step may need: every row of the sequence naming each tracked token, generated ones too.
    const int64_t rows = p.penalized() ? 1 : 1 + spec_.num_tokens;
    const int64_t need = rows * (seq->adjuster.max_row_entries() + (p.penalized() ? request.max_tokens : 0));
    TPS_CHECK(need <= limits_.max_logit_adjustments, "request ", request.id,
              ": its logit bias, penalties and ", "min_tokens may adjust ", need,
              " logits in one step; a step carries at most ", limits_.max_logit_adjustments);
  }
  if (request.constraint)
    TPS_CHECK(limits_.vocab_size > 0, "request ", request.id,
              ": structured output needs the vocabulary size (SchedulerLimits::vocab_size)");
  seq->tokens = request.prompt;
  seq->request = std::move(request);
  waiting_.push_back(std::move(seq));
}

void Scheduler::abort(int64_t request_id) {
  aborted_.push_back(request_id);
}

std::vector<TokenEvent> Scheduler::take_aborted() {
  return std::exchange(aborted_events_, {});
}

void Scheduler::release(Sequence& s) {
  blocks_.release(s.blocks);
  s.num_cached = 0;
  s.num_committed = 0;
  if (s.slot >= 0) free_slots_.push_back(s.slot);
  s.slot = -1;
  s.has_drafts = false;
}

void Scheduler::preempt_newest() {
  auto& seq = running_.back();
  release(*seq);  // its tokens (prompt + generated so far) are recomputed when it is readmitted
  ++preemptions_;
  log_debug("preempted request ", seq->request.id, " (KV cache full)");
  waiting_.push_front(std::move(seq));
  running_.pop_back();
}

int Scheduler::take_cached_prefix(Sequence& s) {
  if (!blocks_.prefix_caching() || s.num_cached > 0) return 0;
  // The last token is always computed: its logits give the next token. (A request that waits for room
  // matches, and lets go, again each step; the blocks it matched count as recently used.)
  const int bs = blocks_.block_size();
  const int last = static_cast<int>(s.tokens.size()) - 1;
  const int blocks = blocks_.match(s.tokens, last / bs, s.blocks);
  s.num_committed = blocks;
  s.num_cached = blocks * bs;
  return s.num_cached;
}

int Scheduler::blocks_computed_for(const Sequence& s) const {
  const int bs = blocks_.block_size(), size = static_cast<int>(s.tokens.size());
  const int block = s.num_cached / bs;   // its first block not from the cache
  const int takeable = (size - 1) / bs;  // its last token is always computed
  // Only a keyed block (its key's tokens known: with MTP the token after it too) is found in the cache.
  if (block >= takeable || block >= blocks_.keyed_blocks(size)) return 0;
  const int end = (block + 1) * bs;  // past that block
  int best = 0;
  for (const Scheduled& sc : last_) {
    const Sequence& a = *sc.seq;
    const int a_size = static_cast<int>(a.tokens.size());
    if (a.num_cached >= end || a.num_cached + sc.num_tokens <= block * bs ||
        blocks_.keyed_blocks(a_size) <= block)
      continue;
    const int common = static_cast<int>(
        std::mismatch(s.tokens.begin(), s.tokens.begin() + std::min(size, a_size), a.tokens.begin()).first -
        s.tokens.begin());
    const int shared = blocks_.keyed_blocks(common);  // blocks keyed by the same tokens in both
    if (shared <= block) continue;
    // After this step: its cached blocks, and those `a` will have completed with the same tokens (and keys).
    const int completed = (a.num_cached + sc.num_tokens) / bs;
    best = std::max({best, block, std::min({completed, shared, takeable})});
  }
  return best;
}

// Drafts verified for `s` this step: k once it is decoding and a draft source has drafts for it.
int Scheduler::drafts_for(const Sequence& s) const {
  if (!speculating() || s.num_cached + 1 != static_cast<int>(s.tokens.size())) return 0;
  if (s.adjuster.penalized()) return 0;  // its rows' penalties would depend on the drafts
  if (s.request.constraint) return 0;    // and a constrained row's mask on the tokens before it
  if (spec_.script) return spec_.num_tokens;
  return s.has_drafts ? spec_.num_tokens : 0;
}

std::optional<StepBatch> Scheduler::schedule() {
  for (int64_t id : aborted_) {
    auto match = [id](const std::unique_ptr<Sequence>& s) { return s->request.id == id; };
    if (auto it = std::find_if(running_.begin(), running_.end(), match); it != running_.end()) {
      release(**it);
      aborted_events_.push_back({id, -1, (*it)->num_generated, FinishReason::kAborted});
      running_.erase(it);
    } else if (auto w = std::find_if(waiting_.begin(), waiting_.end(), match); w != waiting_.end()) {
      release(**w);
      aborted_events_.push_back({id, -1, (*w)->num_generated, FinishReason::kAborted});
      waiting_.erase(w);
    }
  }
  aborted_.clear();

  last_.clear();
  int budget = limits_.max_step_tokens;
  // Tokens prefill chunks may still take this step (max_prefill_step_tokens in all; decode rows do not count
  // against it, so that they never hold prompts back), within what is left of the step.
  int prefill_budget = limits_.max_prefill_step_tokens > 0 ? limits_.max_prefill_step_tokens : budget;
  const int lookahead = mtp_drafting() ? spec_.num_tokens : 0;  // MTP draft steps' KV
  int adjust_budget = limits_.max_logit_adjustments;            // logit adjustments the step may still carry
  // Running sequences first (decode, or the next chunk of a long prompt).
  for (size_t i = 0; i < running_.size() && budget > 0; ++i) {
    Sequence* s = running_[i].get();
    const int drafts = drafts_for(*s);
    const int left = static_cast<int>(s->tokens.size()) - s->num_cached;
    if (drafts == 0 && left > 1 && prefill_budget <= 0) continue;  // a prompt's next chunk waits a step
    const int n = drafts > 0 ? (drafts + 1 <= budget ? drafts + 1 : 0)
                             : std::min(left, left > 1 ? std::min(budget, prefill_budget) : budget);
    if (n == 0) break;
    const bool samples = drafts > 0 || s->num_cached + n == static_cast<int>(s->tokens.size());
    const int adjustments = samples ? adjustments_for(*s, drafts + 1) : 0;
    if (adjustments > adjust_budget) continue;  // waits for a step with room for its logit adjustments
    while (!blocks_.reserve(s->blocks, s->num_cached + n + lookahead)) {
      const bool self = running_.back().get() == s;
      preempt_newest();
      if (self) break;
    }
    if (i >= running_.size() || running_[i].get() != s) break;  // s itself was preempted
    last_.push_back({s, n, samples, drafts});
    budget -= n;
    adjust_budget -= adjustments;
    if (drafts == 0 && left > 1) prefill_budget -= n;
  }
  // Then admit waiting requests as prefills, in order. One whose next block another sequence computes this
  // step waits (and takes it from the cache next step), keeping its place in the batch and the KV blocks its
  // whole prompt needs from those behind it.
  deferred_ = 0;
  int promised_blocks = 0;  // the deferred ones' (an upper bound: what they match next step is not taken)
  for (size_t w = 0; w < waiting_.size() && std::min(budget, prefill_budget) > 0 &&
                     static_cast<int>(running_.size()) + deferred_ < limits_.max_batch;) {
    Sequence* s = waiting_[w].get();
    const int hit = take_cached_prefix(*s);
    if (const int cached_next = blocks_computed_for(*s); cached_next > 0) {
      // Next step it takes those blocks from the cache and needs the rest of its prompt's: promised, with
      // the cached ones that letting go of now counts as free.
      const int free_before = blocks_.num_free();
      release(*s);
      const int promise = blocks_.blocks_for(static_cast<int>(s->tokens.size()) + lookahead) - cached_next +
                          (blocks_.num_free() - free_before);
      if (promise > blocks_.num_free() - promised_blocks) break;  // no room for it: it waits as queued
      ++deferred_;
      promised_blocks += promise;
      ++w;
      continue;
    }
    const int n =
        std::min(static_cast<int>(s->tokens.size()) - s->num_cached, std::min(budget, prefill_budget));
    const int blocks_needed =
        blocks_.blocks_for(s->num_cached + n + lookahead) - static_cast<int>(s->blocks.size());
    const bool samples = s->num_cached + n == static_cast<int>(s->tokens.size());
    const int adjustments = samples ? adjustments_for(*s, 1) : 0;
    // Room beside the blocks held back for the deferred ones, and for its logit adjustments.
    if (blocks_needed > blocks_.num_free() - promised_blocks || adjustments > adjust_budget ||
        !blocks_.reserve(s->blocks, s->num_cached + n + lookahead)) {
      release(*s);  // the cached blocks it took wait for it in the cache
      break;
    }
    if (mtp_drafting()) {
      s->slot = free_slots_.back();
      free_slots_.pop_back();
    }
    if (!s->admitted) {
      s->admitted = true;
      admitted_.push_back({s->request.id, hit});
      if (blocks_.prefix_caching()) {
        prefix_metrics_.queried_tokens += static_cast<int64_t>(s->request.prompt.size());
        prefix_metrics_.hit_tokens += hit;
      }
    }
    running_.push_back(std::move(waiting_[w]));
    waiting_.erase(waiting_.begin() + static_cast<std::ptrdiff_t>(w));
    last_.push_back({s, n, samples, 0});
    budget -= n;
    prefill_budget -= n;
    adjust_budget -= adjustments;
  }
  last_mix_ = {};
  if (last_.empty()) return std::nullopt;
  for (const auto& sc : last_) {
    // Decoding: the only token without KV is the one the previous step generated.
    const Sequence& s = *sc.seq;
    const bool decode = s.num_generated > 0 && s.num_cached + 1 == static_cast<int>(s.tokens.size());
    if (decode) {
      ++last_mix_.decode_seqs;
    } else {
      ++last_mix_.prefill_seqs;
      last_mix_.prefill_tokens += sc.num_tokens;
    }
  }

  StepBatch b;
  const int bs = blocks_.block_size();
  const bool mtp = mtp_drafting();
  b.max_blocks_per_seq = 0;
  for (const auto& sc : last_)
    b.max_blocks_per_seq = std::max<int>(b.max_blocks_per_seq, sc.seq->blocks.size());
  b.query_start.push_back(0);
  for (size_t q = 0; q < last_.size(); ++q) {
    const Scheduled& sc = last_[q];
    const Sequence& s = *sc.seq;
    std::vector<int32_t> drafts;
    if (sc.drafts > 0 && spec_.script) {
      drafts = spec_.script(s.request.id, s.tokens, sc.drafts);
      TPS_CHECK(static_cast<int>(drafts.size()) == sc.drafts, "draft script returned ", drafts.size(),
                " drafts");
    }
    const int first_row = static_cast<int>(b.token_ids.size());
    if (speculating() && sc.samples) b.group_start.push_back(static_cast<int32_t>(b.sample_rows.size()));
    for (int j = 0; j < sc.num_tokens; ++j) {
      const int p = s.num_cached + j;
      const int32_t token = j == 0 || sc.drafts == 0 ? s.tokens[p]
                            : spec_.script           ? drafts[j - 1]
                                                     : spec_.device_draft(s.slot, j - 1);
      b.token_ids.push_back(token);
      b.positions.push_back(p);
      b.slot_mapping.push_back(s.blocks[p / bs] * bs + p % bs);
      const bool sampled = sc.drafts > 0 || (sc.samples && j + 1 == sc.num_tokens);
      if (sampled) {
        b.sample_rows.push_back(first_row + j);
        b.sampling.push_back(s.request.sampling);
        b.sample_counters.push_back(p + 1);
        b.logprobs.push_back(s.request.logprobs);
        // Row p draws the token at position p + 1: generated token number p + 1 - prompt.
        s.adjuster.append(static_cast<int32_t>(b.sample_rows.size()) - 1,
                          p + 1 - static_cast<int>(s.request.prompt.size()), b.logit_adjustments);
        if (s.request.constraint && s.request.constraint->active())
          append_token_mask(s, static_cast<int32_t>(b.sample_rows.size()) - 1, b);
      }
      if (mtp) {
        // The token after this row: known (prompt or earlier output), or emitted at this sampled row now.
        const bool known = sc.drafts == 0 && p + 1 < static_cast<int>(s.tokens.size());
        b.mtp_next_tokens.push_back(known ? s.tokens[p + 1] : -static_cast<int32_t>(b.sample_rows.size()));
      }
    }
    b.query_start.push_back(static_cast<int32_t>(b.token_ids.size()));
    b.context_lens.push_back(s.num_cached + sc.num_tokens);
    std::vector<int32_t> row(s.blocks);
    row.resize(b.max_blocks_per_seq, 0);
    b.block_tables.insert(b.block_tables.end(), row.begin(), row.end());
    if (mtp && sc.samples) {
      b.draft_slot.push_back(s.slot);
      b.group_seq.push_back(static_cast<int32_t>(q));
    }
  }
  if (speculating()) b.group_start.push_back(static_cast<int32_t>(b.sample_rows.size()));
  // Only a step where some row asks for log-probabilities carries the list (it runs eagerly).
  if (std::all_of(b.logprobs.begin(), b.logprobs.end(), [](int32_t n) { return n < 0; })) b.logprobs.clear();
  return b;
}

void Scheduler::append_token_mask(const Sequence& s, int32_t row, StepBatch& b) const {
  const int words = mask_words(limits_.vocab_size);
  b.mask_rows.push_back(row);
  b.token_masks.resize(b.token_masks.size() + words, 0u);
  uint32_t* mask = b.token_masks.data() + b.token_masks.size() - words;
  TokenConstraint& rule = *s.request.constraint;
  rule.allowed(mask, words);
  if (!rule.complete()) return;
  auto allow = [&](int32_t t) {
    if (t >= 0 && t < limits_.vocab_size) mask[t / 32] |= 1u << (t % 32);
  };
  for (int32_t t : s.request.stop_token_ids) allow(t);
  if (!s.request.ignore_eos)
    for (int32_t t : eos_) allow(t);
}

FinishReason Scheduler::finish_reason(const Sequence& s, int32_t token) const {
  const auto& stop = s.request.stop_token_ids;
  if (std::find(stop.begin(), stop.end(), token) != stop.end()) return FinishReason::kStop;
  if (!s.request.ignore_eos && std::find(eos_.begin(), eos_.end(), token) != eos_.end())
    return FinishReason::kStop;
  if (s.num_generated >= s.request.max_tokens) return FinishReason::kLength;
  if (static_cast<int>(s.tokens.size()) >= limits_.max_seq_len) return FinishReason::kLength;
  return FinishReason::kNone;
}

FinishReason Scheduler::advance_constraint(Sequence& s, int32_t token, FinishReason reason) const {
  TokenConstraint& rule = *s.request.constraint;
  if (!rule.advance(token)) {
    // The mask allowed only what the rule allows: a token outside it means the two disagree.
    log_error("request ", s.request.id, ": generated token ", token,
              " breaks its structured output rule; the request is aborted");
    return FinishReason::kAborted;
  }
  return rule.finished() ? FinishReason::kComplete : reason;  // whole: it ends here, not truncated
}

void Scheduler::finish(std::vector<std::unique_ptr<Sequence>>::iterator it) {
  release(**it);
  running_.erase(it);
}

std::vector<TokenEvent> Scheduler::complete(const StepResult& result) {
  std::vector<TokenEvent> events;
  std::vector<Sequence*> done;
  size_t row = 0, group = 0;
  for (const auto& sc : last_) {
    Sequence& s = *sc.seq;
    if (!sc.samples) {
      s.num_cached += sc.num_tokens;
      continue;
    }
    int accepted = 0;
    if (speculating()) {
      TPS_CHECK(group < result.accepted.size(), "step result lacks the accepted count of group ", group);
      accepted = result.accepted[group++];
      TPS_CHECK(accepted >= 0 && accepted <= sc.drafts, "accepted ", accepted, " of ", sc.drafts, " drafts");
    }
    // Rows verified: the KV of the last token and the accepted drafts is valid; rejected drafts' entries
    // are overwritten later (the sequence length rolls back).
    s.num_cached += sc.drafts > 0 ? accepted + 1 : sc.num_tokens;
    if (sc.drafts > 0) {
      ++spec_metrics_.drafts;
      spec_metrics_.draft_tokens += sc.drafts;
      spec_metrics_.accepted_tokens += accepted;
      for (int j = 0; j < accepted; ++j) ++spec_metrics_.accepted_at[j];
    }
    s.has_drafts = mtp_drafting();
    const size_t rows_of_group = sc.drafts > 0 ? sc.drafts + 1 : 1;
    TPS_CHECK(row + rows_of_group <= result.tokens.size(), "step result has ", result.tokens.size(),
              " tokens");
    for (int j = 0; j <= accepted; ++j) {
      const int32_t token = result.tokens[row + j];
      s.tokens.push_back(token);
      s.adjuster.observe(token);
      ++s.num_generated;
      FinishReason reason = finish_reason(s, token);
      if (s.request.constraint && reason != FinishReason::kStop)
        reason = advance_constraint(s, token, reason);
      events.push_back({s.request.id, token, s.num_generated - 1, reason});
      if (s.request.logprobs >= 0) {
        TPS_CHECK(row + j < result.logprobs.size(), "step result lacks the log-probabilities of row ",
                  row + j);
        events.back().logprobs = result.logprobs[row + j];
      }
      if (reason != FinishReason::kNone) {
        done.push_back(&s);
        break;
      }
    }
    row += rows_of_group;
  }
  // Blocks whose KV is now complete enter the prefix cache (finished sequences' too: they stay cached).
  // Complete: below num_cached, and below the sequence's end (a request that stopped at a token before the
  // last accepted draft has num_cached past it); keyed: with MTP, the token after the block is known.
  if (blocks_.prefix_caching())
    for (const auto& sc : last_) {
      Sequence& s = *sc.seq;
      const int size = static_cast<int>(s.tokens.size());
      const int full =
          std::min(std::min(s.num_cached, size) / blocks_.block_size(), blocks_.keyed_blocks(size));
      if (full > s.num_committed) s.num_committed = blocks_.commit(s.blocks, s.tokens, s.num_committed, full);
    }
  for (Sequence* s : done) {
    auto it = std::find_if(running_.begin(), running_.end(), [s](const auto& p) { return p.get() == s; });
    if (it != running_.end()) finish(it);
  }
  last_.clear();
  return events;
}

}  // namespace tpserve
