// The MTP head (Qwen3-Next layout) inside a step: after the main model, one pass over every row of the step
// (filling the MTP layer's KV cache and giving the first draft), then k - 1 single-token draft steps. Drafts
// go to a device-resident table by sequence slot; the next step's token ids point into it. Everything has
// fixed shapes, so the whole step (drafting included) can be one CUDA graph.
//
// For row i (position p_i) with main final-normed hidden h_i and the next token t_{i+1}:
//   u = fc_e(norm_e(embed(t_{i+1}))) + fc_h(norm_h(h_i))     (fc [H, 2H] split: embedding half first)
//   x = mtp.layers.0(u) (own KV cache at p_i); h'_i = mtp.norm(x); logits(h'_i) -> t_{i+2}
// Draft step j >= 2 feeds h' of the previous step and the previous draft at the next position.
#include "common/log.h"
#include "runtime/model/qwen3_moe.h"

namespace tpserve {

std::vector<int32_t> Qwen3MoeModel::drafts_of_slot(int slot) const {
  TPS_CHECK(slot >= 0 && slot < options_.max_seqs, "draft-table slot ", slot, " outside [0, ",
            options_.max_seqs, ")");
  std::vector<int32_t> table(static_cast<size_t>(draft_table_.numel()));
  backend_.copy_to_host(table.data(), draft_table_);
  std::vector<int32_t> drafts;
  for (int j = 0; j < options_.num_speculative_tokens; ++j)
    drafts.push_back(table[static_cast<size_t>(j) * options_.max_seqs + slot]);
  return drafts;
}

void Qwen3MoeModel::mtp_input(Tensor tokens, Tensor hidden, int n) {
  const MtpWeights& m = weights_.mtp;
  const float eps = static_cast<float>(spec_.rms_norm_eps);
  Tensor a = mtp_a_.rows(0, n), b = mtp_b_.rows(0, n);
  backend_.embedding(tokens, weights_.embed, layout_.vocab_begin(spec_), a);
  all_reduce(a);
  backend_.rmsnorm(a, m.norm_embedding, eps, a);
  backend_.rmsnorm(hidden, m.norm_hidden, eps, b);
  Tensor u = residual_.rows(0, n), v = proj_.rows(0, n);
  backend_.linear(a, m.fc_embedding, u);
  backend_.linear(b, m.fc_hidden, v);
  backend_.add(u, v);
}

void Qwen3MoeModel::mtp_forward(const StepShape& shape, const AttentionMeta& meta) {
  const int tokens = shape.tokens;
  const MtpWeights& m = weights_.mtp;
  const float eps = static_cast<float>(spec_.rms_norm_eps);
  const int k = options_.num_speculative_tokens;

  // Pass 1 over every row: the next token of each row (known, or emitted this step).
  Tensor next = input(off_mtp_next_, DType::kI32, tokens);
  backend_.resolve_tokens(next, emitted_);
  mtp_input(next, normed_.rows(0, tokens), tokens);
  backend_.rmsnorm(residual_.rows(0, tokens), m.layer.input_norm, eps, normed_.rows(0, tokens));
  layer_forward(m.layer, mtp_kv_, meta, tokens, -1, m.final_norm, normed_.rows(0, tokens));
  const int groups = shape.groups;
  if (shape.rows == 0 || k == 0) return;

  // Draft 1 from the row of each group's last accepted token: base row + accepted drafts.
  Tensor rows = draft_rows_.rows(0, groups), accepted = accepted_.rows(0, groups);
  backend_.add_i32(input(off_base_row_, DType::kI32, groups), accepted, 0, rows);
  Tensor hidden = mtp_h_.rows(0, groups), drafts = draft_tokens_.rows(0, groups);
  backend_.gather_rows(normed_.rows(0, tokens), rows, hidden);
  Tensor table = draft_table_.view({draft_table_.numel()});
  Tensor positions = draft_pos_.rows(0, groups), slots = draft_slots_.rows(0, groups),
         ctx = draft_ctx_.rows(0, groups);
  Tensor tables = draft_tables_.rows(0, groups);
  backend_.gather_rows(meta.block_tables, input(off_group_seq_, DType::kI32, groups), tables);
  AttentionMeta step{positions,
                     slots,
                     input(off_iota_, DType::kI32, groups + 1),
                     ctx,
                     tables,
                     groups,
                     1,
                     meta.max_context_len + 2 * k};
  for (int j = 0; j < k; ++j) {
    if (j > 0) {
      // One token per group at position (base + accepted) + j, fed the previous draft and hidden state.
      backend_.add_i32(input(off_base_pos_, DType::kI32, groups), accepted, j, positions);
      backend_.draft_step_meta(positions, tables, options_.kv_block_size, slots, ctx);
      mtp_input(drafts, hidden, groups);
      backend_.rmsnorm(residual_.rows(0, groups), m.layer.input_norm, eps, normed_.rows(0, groups));
      layer_forward(m.layer, mtp_kv_, step, groups, -1, m.final_norm, hidden);
    }
    // Where the step's logits are kept for the caller (tests), the drafts' go elsewhere; else they may reuse
    // the step's buffer.
    Tensor logits = (draft_logits_.data != nullptr ? draft_logits_ : logits_).rows(0, groups);
    const Candidates cand = lm_head_candidates(hidden, groups, greedy_.temperature.rows(0, groups), logits);
    SamplingInputs greedy{greedy_.temperature.rows(0, groups), greedy_.top_k.rows(0, groups),
                          greedy_.top_p.rows(0, groups),       greedy_.min_p.rows(0, groups),
                          greedy_.seed.rows(0, groups),        greedy_.counter.rows(0, groups)};
    backend_.sample(cand.values, cand.ids, cand.stats, greedy, drafts);
    backend_.scatter_i32(
        drafts, input(off_draft_index_ + static_cast<size_t>(j) * options_.max_seqs * 4, DType::kI32, groups),
        table);
  }
}

}  // namespace tpserve
