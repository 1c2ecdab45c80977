// StepBatch: everything one forward step needs, built on the host by the engine (and broadcast by the
// control plane under MPI), in the order the model consumes it. T tokens from S sequences; R rows sampled.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace tpserve {

struct SamplingParams {
  float temperature = 0.0f;  // 0 = greedy
  int32_t top_k = 0;         // 0 = off
  float top_p = 1.0f;        // 1 = off
  float min_p = 0.0f;        // 0 = off
  int64_t seed = 0;
};

// One adjusted logit of a sampled row (logit bias, penalties, min_tokens), applied before sampling in vLLM's
// order: x = logit + bias; x = x > 0 ? x / scale : x * scale; x -= subtract. A row names each token once.
struct LogitAdjustment {
  int32_t row = 0;        // sampled row (index into sample_rows)
  int32_t token = 0;      // vocabulary id
  float bias = 0.0f;      // logit_bias; -inf: the token may not be drawn (min_tokens)
  float scale = 1.0f;     // repetition penalty (1: none)
  float subtract = 0.0f;  // frequency x count + presence
};

// 32-bit words of a token mask over a vocabulary of `vocab` ids.
inline int mask_words(int64_t vocab) {
  return static_cast<int>((vocab + 31) / 32);
}

struct StepBatch {
  std::vector<int32_t> token_ids;     // [T]
  std::vector<int32_t> positions;     // [T]
  std::vector<int32_t> slot_mapping;  // [T] KV slot (block * block_size + offset); -1 = padding
  std::vector<int32_t> query_start;   // [S + 1]
  std::vector<int32_t> context_lens;  // [S] tokens cached for the sequence after this step
  std::vector<int32_t> block_tables;  // [S * max_blocks_per_seq]
  int max_blocks_per_seq = 0;
  std::vector<int32_t> sample_rows;      // [R] token rows whose next token is drawn
  std::vector<SamplingParams> sampling;  // [R]
  std::vector<int64_t> sample_counters;  // [R] index of the token being drawn within its sequence

  // Speculative decoding (empty without it). Sampled rows come in G groups, one per sequence that draws this
  // step: rows [group_start[g], group_start[g + 1]). A group of n + 1 rows verifies n drafts: the input token
  // of its row j + 1 is the draft for the position after row j. A negative token id -(1 + i) in token_ids
  // stands for entry i of the model's device-resident draft table (MTP drafts never visit the host).
  std::vector<int32_t> group_start;  // [G + 1]
  // MTP drafting (empty unless the MTP head runs): the token after each row, -(1 + r) meaning "the token
  // emitted at sampled row r this step"; per group, the draft-table slot its next drafts go to (-1: none)
  // and the sequence index (for its block table).
  std::vector<int32_t> mtp_next_tokens;  // [T]
  std::vector<int32_t> draft_slot;       // [G]
  std::vector<int32_t> group_seq;        // [G]

  // Log-probabilities (empty unless a row asks): per sampled row, how many of the most likely tokens to
  // return beside the drawn token's log-probability, -1 for none. A step that asks runs eagerly.
  std::vector<int32_t> logprobs;  // [R]

  // Logit adjustments (empty unless a row asks: logit_bias, penalties, min_tokens), applied to the sampled
  // rows' logits before they are sampled (and before log-probabilities are taken). A step that has any runs
  // eagerly.
  std::vector<LogitAdjustment> logit_adjustments;  // [E]

  // Token masks (structured output; empty unless a row is constrained): sampled row mask_rows[m] may draw
  // only the tokens whose bits are set in token_masks[m * W, (m + 1) * W), W = mask_words(vocab) (token t:
  // bit t % 32 of word t / 32); the others' logits become -inf, after the logit adjustments. A step that has
  // any runs eagerly.
  std::vector<int32_t> mask_rows;     // [M] distinct sampled rows
  std::vector<uint32_t> token_masks;  // [M * W]

  int num_tokens() const { return static_cast<int>(token_ids.size()); }
  int num_seqs() const { return static_cast<int>(context_lens.size()); }
  int num_samples() const { return static_cast<int>(sample_rows.size()); }
  int num_groups() const {
    return group_start.empty() ? num_samples() : static_cast<int>(group_start.size()) - 1;
  }
};

// A drawn token's log-probability and the most likely tokens', under the model's raw distribution (the
// logits' softmax: no temperature, no filters), as vLLM reports them by default.
struct TokenLogprobs {
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> top;  // best first (ties: smaller id)
};

struct StepResult {
  std::vector<int32_t> tokens;    // [R] per sampled row: the token emitted there (rows past a rejection: -1)
  std::vector<int32_t> accepted;  // [G] drafts accepted per group (speculative steps only)
  std::vector<float> logits;      // [R, vocab] when asked for (tests, debugging)
  std::vector<TokenLogprobs> logprobs;  // [R] when the batch asked for any (rows that did not: empty)
};

}  // namespace tpserve
