#include "runtime/model/qwen3_moe.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "common/log.h"

namespace tpserve {
namespace {

size_t align8(size_t n) {
  return (n + 7) & ~size_t(7);
}

template <typename T>
void put(std::vector<char>& host, size_t offset, const std::vector<T>& values, size_t capacity,
         const char* what) {
  TPS_CHECK(values.size() <= capacity, "step has ", values.size(), " ", what, ", more than the ", capacity,
            " the model was sized for");
  if (!values.empty()) std::memcpy(host.data() + offset, values.data(), values.size() * sizeof(T));
}

}  // namespace

Qwen3MoeModel::Qwen3MoeModel(const ModelSpec& spec, const ShardLayout& layout, ModelWeights weights,
                             const ModelOptions& options, Backend& backend, parallel::Communicator& comm)
    : spec_(spec),
      layout_(layout),
      weights_(std::move(weights)),
      options_(options),
      backend_(backend),
      comm_(comm) {
  q_heads_ = layout_.local_q_heads(spec_);
  kv_heads_ = layout_.local_kv_heads(spec_);
  rope_ = {spec_.rope_theta, spec_.head_dim};
  candidates_ = std::min(options_.sampling_candidates, layout_.local_vocab(spec_));
  if (layout_.tp_size > 1 && candidates_ < options_.sampling_candidates && candidates_ < spec_.vocab_size)
    log_warn("runtime.sampling_candidates ", options_.sampling_candidates,
             " exceeds this rank's vocabulary slice (", candidates_, " of ", spec_.vocab_size,
             "): each rank's best ", candidates_, " are merged into ", candidates_,
             ", so seeded draws differ from a single rank's");
  TPS_CHECK(comm_.size() == layout_.tp_size, "communicator of ", comm_.size(), " ranks for tp ",
            layout_.tp_size);

  const DType act = backend_.activation_dtype();
  // Step-input layout: fixed offsets for the largest step.
  const size_t t = options_.max_tokens, s = options_.max_seqs, r = options_.max_samples;
  const size_t kspec = std::max(options_.num_speculative_tokens, 1);
  size_t off = 0;
  auto take = [&](size_t bytes) {
    const size_t at = off;
    off = align8(off + bytes);
    return at;
  };
  off_ids_ = take(t * 4), off_pos_ = take(t * 4), off_slots_ = take(t * 4), off_qstart_ = take((s + 1) * 4);
  off_ctx_ = take(s * 4), off_tables_ = take(s * options_.max_blocks_per_seq * 4), off_rows_ = take(r * 4);
  off_temp_ = take(r * 4), off_topk_ = take(r * 4), off_topp_ = take(r * 4), off_minp_ = take(r * 4);
  off_seed_ = take(r * 8), off_counter_ = take(r * 8);
  off_group_start_ = take((s + 1) * 4), off_base_row_ = take(s * 4), off_base_pos_ = take(s * 4);
  off_group_seq_ = take(s * 4), off_draft_index_ = take(kspec * s * 4), off_mtp_next_ = take(t * 4);
  off_iota_ = take((s + 1) * 4);
  host_inputs_.assign(off, 0);
  inputs_ = backend_.alloc(DType::kU8, {static_cast<int64_t>(off)});

  // Workspace for the largest step.
  const int64_t h = spec_.hidden_size, d = spec_.head_dim, T = options_.max_tokens, R = options_.max_samples;
  residual_ = backend_.alloc(act, {T, h});
  normed_ = backend_.alloc(act, {T, h});
  qkv_ = backend_.alloc(act, {T, (q_heads_ + 2 * kv_heads_) * d});
  q_ = backend_.alloc(act, {T, q_heads_ * d});
  attn_ = backend_.alloc(act, {T, q_heads_ * d});
  // The MoE output is all-gathered in equal slices under all-to-all dispatch: room for P * ceil(T / P) rows.
  const int64_t P = layout_.tp_size, slice = (T + P - 1) / P;
  proj_ = backend_.alloc(act, {P * slice, h});
  const int k = std::max(spec_.num_experts_per_tok, 1);
  router_logits_ = backend_.alloc(DType::kF32, {T, std::max(spec_.num_experts, 1)});
  topk_w_ = backend_.alloc(DType::kF32, {T, k});
  topk_ids_ = backend_.alloc(DType::kI32, {T, k});
  const int64_t inter = std::max(layout_.local_dense_intermediate(spec_), 1);
  gate_up_ = backend_.alloc(act, {T, 2 * inter});
  act_ = backend_.alloc(act, {T, inter});
  sample_hidden_ = backend_.alloc(act, {R, h});
  logits_ = backend_.alloc(DType::kF32, {R, layout_.local_vocab(spec_)});
  const int64_t C = candidates_;
  cand_vals_ = backend_.alloc(DType::kF32, {R, C});
  cand_ids_ = backend_.alloc(DType::kI32, {R, C});
  cand_stats_ = backend_.alloc(DType::kF32, {R, 2});
  all_vals_ = backend_.alloc(DType::kF32, {P, R, C});
  all_ids_ = backend_.alloc(DType::kI32, {P, R, C});
  all_stats_ = backend_.alloc(DType::kF32, {P, R, 2});
  raw_mine_ = {backend_.alloc(DType::kF32, {R, C}), backend_.alloc(DType::kI32, {R, C}),
               backend_.alloc(DType::kF32, {R, 2})};
  raw_all_ = {backend_.alloc(DType::kF32, {P, R, C}), backend_.alloc(DType::kI32, {P, R, C}),
              backend_.alloc(DType::kF32, {P, R, 2})};
  if (options_.max_logit_adjustments > 0) {
    const int64_t E = options_.max_logit_adjustments;
    adjust_targets_ = backend_.alloc(DType::kI32, {E, 2});
    adjust_values_ = backend_.alloc(DType::kF32, {E, 3});
    host_adjust_targets_.reserve(static_cast<size_t>(E) * 2);
    host_adjust_values_.reserve(static_cast<size_t>(E) * 3);
  }
  if (options_.max_token_masks > 0) {
    mask_rows_ = backend_.alloc(DType::kI32, {options_.max_token_masks});
    token_masks_ = backend_.alloc(DType::kI32, {options_.max_token_masks, mask_words(spec_.vocab_size)});
  }
  ones_ = backend_.alloc(DType::kF32, {R});
  backend_.copy_from_host(ones_, std::vector<float>(static_cast<size_t>(R), 1.0f).data());
  const int64_t S = options_.max_seqs;
  row_tokens_ = backend_.alloc(DType::kI32, {R});
  // The step's results in one buffer, so that the host reads them with one copy: tokens, then accepted
  // counts.
  step_results_ = backend_.alloc(DType::kI32, {R + S});
  emitted_ = step_results_.rows(0, R);
  accepted_ = step_results_.rows(R, R + S);
  // Drafts stay on the device between steps: [k, max_seqs] by draft-table slot, plus one trash entry.
  draft_table_ = backend_.alloc(DType::kI32, {static_cast<int64_t>(kspec) * S + 1});
  if (weights_.mtp.present) {
    mtp_a_ = backend_.alloc(act, {T, h});
    mtp_b_ = backend_.alloc(act, {T, h});
    mtp_h_ = backend_.alloc(act, {S, h});
    draft_tokens_ = backend_.alloc(DType::kI32, {S});
    draft_rows_ = backend_.alloc(DType::kI32, {S});
    draft_pos_ = backend_.alloc(DType::kI32, {S});
    draft_slots_ = backend_.alloc(DType::kI32, {S});
    draft_ctx_ = backend_.alloc(DType::kI32, {S});
    draft_tables_ = backend_.alloc(DType::kI32, {S, options_.max_blocks_per_seq});
    // Greedy sampling parameters for drafting (all zeros: temperature 0).
    greedy_ = {backend_.alloc(DType::kF32, {S}), backend_.alloc(DType::kI32, {S}),
               backend_.alloc(DType::kF32, {S}), backend_.alloc(DType::kF32, {S}),
               backend_.alloc(DType::kI64, {S}), backend_.alloc(DType::kI64, {S})};
    const std::vector<float> ones(S, 1.0f);
    backend_.copy_from_host(greedy_.top_p, ones.data());
  }
  if (options_.record_routing) {
    // One row per layer, wide enough for the top-k ids of a full step or the expert ids of a full exchange.
    routing_ids_ = backend_.alloc(DType::kI32, {spec_.num_layers, routing_width(T)});
  }
  if (options_.keep_logits) {
    all_logits_ = backend_.alloc(DType::kF32, {P, R, layout_.local_vocab(spec_)});
    if (weights_.mtp.present) draft_logits_ = backend_.alloc(DType::kF32, {S, layout_.local_vocab(spec_)});
  }
  if (layout_.all_to_all) {
    TPS_CHECK(layout_.ep_size == P, "all-to-all dispatch needs ep == tp (", layout_.ep_size, " vs ", P, ")");
    const int64_t cap = slice * k;  // worst case: every slot of every token of a slice to one rank
    a2a_send_x_ = backend_.alloc(act, {P, cap, h});
    a2a_recv_x_ = backend_.alloc(act, {P, cap, h});
    a2a_results_ = backend_.alloc(act, {P, cap, h});
    a2a_back_ = backend_.alloc(act, {P, cap, h});
    a2a_send_expert_ = backend_.alloc(DType::kI32, {P, cap});
    a2a_recv_expert_ = backend_.alloc(DType::kI32, {P, cap});
    a2a_origin_ = backend_.alloc(DType::kI32, {slice, k});
    a2a_slice_out_ = backend_.alloc(act, {slice, h});
  }
  allocate_kv_cache();
  log_info("model ready: ", spec_.summary(), "; KV cache ", options_.num_kv_blocks, " blocks x ",
           options_.kv_block_size, " tokens (", static_cast<double>(kv_bytes_) / 1e6, " MB); ",
           backend_.name(), " backend holds ", static_cast<double>(backend_.allocated_bytes()) / 1e6, " MB");
}

Tensor Qwen3MoeModel::input(size_t offset, DType dtype, int64_t n) const {
  return Tensor(static_cast<char*>(inputs_.data) + offset, dtype, inputs_.device, {n});
}

Qwen3MoeModel::StepShape Qwen3MoeModel::upload(const StepBatch& b) {
  const size_t t = options_.max_tokens, s = options_.max_seqs, r = options_.max_samples;
  TPS_CHECK(b.positions.size() == b.token_ids.size() && b.slot_mapping.size() == b.token_ids.size(),
            "step batch: positions/slot_mapping do not match token_ids");
  TPS_CHECK(b.query_start.size() == b.context_lens.size() + 1,
            "step batch: query_start must have S + 1 entries");
  TPS_CHECK(b.max_blocks_per_seq <= options_.max_blocks_per_seq, "step batch: ", b.max_blocks_per_seq,
            " blocks per sequence > ", options_.max_blocks_per_seq);
  TPS_CHECK(b.sampling.size() == b.sample_rows.size() && b.sample_counters.size() == b.sample_rows.size(),
            "step batch: sampling rows mismatch");
  put(host_inputs_, off_ids_, b.token_ids, t, "tokens");
  put(host_inputs_, off_pos_, b.positions, t, "positions");
  put(host_inputs_, off_slots_, b.slot_mapping, t, "slots");
  put(host_inputs_, off_qstart_, b.query_start, s + 1, "sequence starts");
  put(host_inputs_, off_ctx_, b.context_lens, s, "sequences");
  // Block tables are stored with the model's fixed width. Entries past a sequence's own blocks name the
  // padding block (options_.num_kv_blocks), so that a write through one can only reach that block, never a
  // live sequence's (the MTP draft steps of padding sequences reach past their q rows).
  const int width = options_.max_blocks_per_seq;
  std::vector<int32_t> tables(static_cast<size_t>(b.num_seqs()) * width, options_.num_kv_blocks);
  for (int q = 0; q < b.num_seqs(); ++q)
    std::copy_n(b.block_tables.begin() + static_cast<size_t>(q) * b.max_blocks_per_seq, b.max_blocks_per_seq,
                tables.begin() + static_cast<size_t>(q) * width);
  put(host_inputs_, off_tables_, tables, s * width, "block-table entries");
  put(host_inputs_, off_rows_, b.sample_rows, r, "sampled rows");
  std::vector<float> temp, topp, minp;
  std::vector<int32_t> topk;
  std::vector<int64_t> seed;
  for (const auto& p : b.sampling) {
    temp.push_back(p.temperature), topk.push_back(p.top_k), topp.push_back(p.top_p), minp.push_back(p.min_p);
    seed.push_back(p.seed);
  }
  put(host_inputs_, off_temp_, temp, r, "temperatures");
  put(host_inputs_, off_topk_, topk, r, "top-k values");
  put(host_inputs_, off_topp_, topp, r, "top-p values");
  put(host_inputs_, off_minp_, minp, r, "min-p values");
  put(host_inputs_, off_seed_, seed, r, "seeds");
  put(host_inputs_, off_counter_, b.sample_counters, r, "counters");
  // Groups of sampled rows (one per sequence that draws); without speculation every row is its own group.
  std::vector<int32_t> group_start = b.group_start;
  if (group_start.empty())
    for (int i = 0; i <= b.num_samples(); ++i) group_start.push_back(i);
  const int groups = static_cast<int>(group_start.size()) - 1;
  std::vector<int32_t> base_row(groups), base_pos(groups), draft_index;
  for (int g = 0; g < groups; ++g) {
    TPS_CHECK(group_start[g] < group_start[g + 1] && group_start[g + 1] <= b.num_samples(),
              "step batch: bad group ", g);
    base_row[g] = b.sample_rows[group_start[g]];
    base_pos[g] = b.positions[base_row[g]];
  }
  put(host_inputs_, off_group_start_, group_start, s + 1, "group starts");
  put(host_inputs_, off_base_row_, base_row, s, "groups");
  put(host_inputs_, off_base_pos_, base_pos, s, "groups");
  if (!b.mtp_next_tokens.empty()) {
    TPS_CHECK(b.mtp_next_tokens.size() == b.token_ids.size(),
              "step batch: mtp_next_tokens must have T entries");
    TPS_CHECK(b.draft_slot.size() == static_cast<size_t>(groups) &&
                  b.group_seq.size() == static_cast<size_t>(groups),
              "step batch: draft_slot / group_seq must have one entry per group");
    TPS_CHECK(!b.group_start.empty(), "step batch: MTP drafting needs sampled-row groups");
    const int k = options_.num_speculative_tokens, trash = k * options_.max_seqs;
    draft_index.assign(static_cast<size_t>(std::max(k, 1)) * s, trash);  // [k, max_seqs]
    for (int j = 0; j < k; ++j)
      for (int g = 0; g < groups; ++g)
        if (b.draft_slot[g] >= 0) draft_index[j * s + g] = j * options_.max_seqs + b.draft_slot[g];
    put(host_inputs_, off_draft_index_, draft_index, static_cast<size_t>(std::max(k, 1)) * s,
        "draft indices");
    put(host_inputs_, off_mtp_next_, b.mtp_next_tokens, t, "MTP next tokens");
    put(host_inputs_, off_group_seq_, b.group_seq, s, "groups");
    std::vector<int32_t> iota(groups + 1);
    for (int g = 0; g <= groups; ++g) iota[g] = g;
    put(host_inputs_, off_iota_, iota, s + 1, "groups");
  }
  backend_.copy_from_host(inputs_, host_inputs_.data());

  StepShape shape;
  shape.tokens = b.num_tokens(), shape.rows = b.num_samples(), shape.groups = groups,
  shape.seqs = b.num_seqs();
  shape.speculative = !b.group_start.empty();
  shape.mtp = !b.mtp_next_tokens.empty() && weights_.mtp.present;
  if (!b.logprobs.empty()) {
    TPS_CHECK(b.logprobs.size() == b.sample_rows.size(),
              "step batch: logprobs must have one entry per sampled row");
    for (int32_t n : b.logprobs)
      TPS_CHECK(n <= candidates_, "step batch: ", n,
                " top logprobs asked, more than runtime.sampling_candidates (", candidates_, ")");
    shape.logprobs = true;
  }
  shape.adjustments = upload_logit_adjustments(b);
  shape.masks = upload_token_masks(b);
  for (int q = 0; q < shape.seqs; ++q)
    shape.max_query_len = std::max(shape.max_query_len, b.query_start[q + 1] - b.query_start[q]);
  shape.max_context_len =
      b.context_lens.empty() ? 0 : *std::max_element(b.context_lens.begin(), b.context_lens.end());
  return shape;
}

AttentionMeta Qwen3MoeModel::attention_meta(const StepShape& shape) const {
  const int64_t T = shape.tokens, S = shape.seqs, width = options_.max_blocks_per_seq;
  AttentionMeta meta;
  meta.positions = input(off_pos_, DType::kI32, T);
  meta.slot_mapping = input(off_slots_, DType::kI32, T);
  meta.query_start = input(off_qstart_, DType::kI32, S + 1);
  meta.context_lens = input(off_ctx_, DType::kI32, S);
  meta.block_tables = input(off_tables_, DType::kI32, S * width).view({S, width});
  meta.num_seqs = static_cast<int>(S);
  meta.max_query_len = shape.max_query_len;
  meta.max_context_len = shape.max_context_len;
  return meta;
}

SamplingInputs Qwen3MoeModel::sampling_inputs(const StepShape& shape) const {
  const int64_t R = shape.rows;
  return {input(off_temp_, DType::kF32, R), input(off_topk_, DType::kI32, R),
          input(off_topp_, DType::kF32, R), input(off_minp_, DType::kF32, R),
          input(off_seed_, DType::kI64, R), input(off_counter_, DType::kI64, R)};
}

Qwen3MoeModel::Candidates Qwen3MoeModel::lm_head_candidates(Tensor hidden, int n, Tensor temperature,
                                                            Tensor logits, int adjustments, int masks) {
  backend_.linear(hidden, weights_.lm_head, logits);
  if (adjustments > 0)
    backend_.adjust_logits(logits, layout_.vocab_begin(spec_), adjust_targets_.rows(0, adjustments),
                           adjust_values_.rows(0, adjustments));
  if (masks > 0)
    backend_.mask_logits(logits, layout_.vocab_begin(spec_), mask_rows_.rows(0, masks),
                         token_masks_.rows(0, masks));
  return candidates(logits, n, temperature, {cand_vals_, cand_ids_, cand_stats_},
                    {all_vals_, all_ids_, all_stats_});
}

Qwen3MoeModel::Candidates Qwen3MoeModel::candidates(Tensor logits, int n, Tensor temperature,
                                                    const Candidates& mine, const Candidates& all_ranks) {
  const int64_t C = candidates_, P = layout_.tp_size;
  Tensor vals = mine.values.rows(0, n), cids = mine.ids.rows(0, n), stats = mine.stats.rows(0, n);
  backend_.sampling_candidates(logits, layout_.vocab_begin(spec_), temperature, vals, cids, stats);
  if (P == 1) return {vals.view({1, n, C}), cids.view({1, n, C}), stats.view({1, n, 2})};
  Candidates all{all_ranks.values.view({P, n, C}), all_ranks.ids.view({P, n, C}),
                 all_ranks.stats.view({P, n, 2})};
  comm_.all_gather(vals.data, all.values.data, static_cast<size_t>(n * C), DType::kF32);
  comm_.all_gather(cids.data, all.ids.data, static_cast<size_t>(n * C), DType::kI32);
  comm_.all_gather(stats.data, all.stats.data, static_cast<size_t>(n * 2), DType::kF32);
  return all;
}

void Qwen3MoeModel::all_reduce(Tensor t) {
  if (comm_.size() > 1) comm_.all_reduce_sum(t.data, static_cast<size_t>(t.numel()), t.dtype);
}

void Qwen3MoeModel::reduce_add_rmsnorm(Tensor residual, Tensor x, Tensor w, float eps, Tensor out,
                                       bool partial) {
  if (partial && comm_.size() > 1) {
    const int64_t hidden = x.dim(-1), rows = x.numel() / std::max<int64_t>(hidden, 1);
    TPS_CHECK(residual.numel() == x.numel() && out.numel() == x.numel() && w.numel() == hidden,
              "reduce_add_rmsnorm: x ", x.shape_string(), " residual ", residual.shape_string(), " w ",
              w.shape_string(), " out ", out.shape_string());
    const bool bf16 = x.dtype == DType::kBF16 && residual.dtype == DType::kBF16 && w.dtype == DType::kBF16 &&
                      out.dtype == DType::kBF16;
    if (bf16 && comm_.all_reduce_add_rmsnorm(x.data, residual.data, w.data, out.data, static_cast<int>(rows),
                                             static_cast<int>(hidden), eps))
      return;
    all_reduce(x);
  }
  backend_.add_rmsnorm(residual, x, w, eps, out);
}

// Expert parallelism with all-to-all dispatch: each rank routes its slice of the tokens, sends each (token,
// slot) to the rank owning the expert, runs the rows it received, sends results back, combines its slice
// and all-gathers the slices. Buffers are worst-case sized, so shapes never depend on the routing.
void Qwen3MoeModel::moe_all_to_all(const LayerWeights& w, Tensor normed, Tensor out, int tokens,
                                   int routing_layer) {
  const int64_t P = layout_.tp_size, r = layout_.tp_rank, h = spec_.hidden_size,
                k = spec_.num_experts_per_tok;
  const int64_t slice = (tokens + P - 1) / P, cap = slice * k;
  const int64_t begin = std::min<int64_t>(r * slice, tokens), end = std::min<int64_t>(begin + slice, tokens);
  const int64_t n = end - begin;
  Tensor mine = normed.rows(begin, end);
  Tensor logits = router_logits_.rows(0, n), weights = topk_w_.rows(0, n), ids = topk_ids_.rows(0, n);
  backend_.linear(mine, w.router, logits);
  backend_.topk_gating(logits, static_cast<int>(k), spec_.norm_topk_prob, weights, ids);
  Tensor send_x = a2a_send_x_.view({P, cap, h}), recv_x = a2a_recv_x_.view({P, cap, h});
  Tensor send_e = a2a_send_expert_.view({P, cap}), recv_e = a2a_recv_expert_.view({P, cap});
  if (options_.record_routing && routing_layer >= 0)
    recv_e = routing_ids_.rows(routing_layer, routing_layer + 1).view({P, cap});
  Tensor origin = a2a_origin_.view({n, k});
  backend_.moe_pack(mine, ids, layout_.local_experts(spec_), send_x, send_e, origin);
  comm_.all_to_all(send_x.data, recv_x.data, static_cast<size_t>(cap * h), send_x.dtype);
  comm_.all_to_all(send_e.data, recv_e.data, static_cast<size_t>(cap), DType::kI32);
  Tensor results = a2a_results_.view({P * cap, h}), back = a2a_back_.view({P * cap, h});
  backend_.moe_experts_rows(recv_x.view({P * cap, h}), recv_e.view({P * cap}), w.gate_up, w.down, results);
  comm_.all_to_all(results.data, back.data, static_cast<size_t>(cap * h), results.dtype);
  Tensor slice_out = a2a_slice_out_.view({slice, h});
  backend_.moe_combine(back, origin, weights, slice_out.rows(0, n));
  comm_.all_gather(slice_out.data, out.data, static_cast<size_t>(slice * h), slice_out.dtype);
}

Tensor Qwen3MoeModel::routing_outputs(int tokens, int routing_layer, Tensor& weights, Tensor& ids) {
  weights = topk_w_.rows(0, tokens);
  ids = options_.record_routing && routing_layer >= 0
            ? routing_ids_.rows(routing_layer, routing_layer + 1).view({tokens, spec_.num_experts_per_tok})
            : topk_ids_.rows(0, tokens);
  return router_logits_.rows(0, tokens);
}

void Qwen3MoeModel::route(const LayerWeights& w, Tensor normed, int tokens, int routing_layer,
                          Tensor& weights, Tensor& ids) {
  Tensor logits = routing_outputs(tokens, routing_layer, weights, ids);
  backend_.linear(normed, w.router, logits);
  backend_.topk_gating(logits, spec_.num_experts_per_tok, spec_.norm_topk_prob, weights, ids);
}

void Qwen3MoeModel::mlp_forward(const LayerWeights& w, Tensor normed, Tensor out, int tokens,
                                int routing_layer) {
  if (w.moe && layout_.all_to_all) {
    moe_all_to_all(w, normed, proj_, tokens, routing_layer);
    return;
  }
  if (!w.moe) {
    const int64_t inter = w.down.dim(1);
    Tensor gate_up = gate_up_.view({tokens, 2 * inter}), act = act_.view({tokens, inter});
    backend_.linear(normed, w.gate_up, gate_up);
    backend_.silu_mul(gate_up, act);
    backend_.linear(act, w.down, out);
  } else {
    Tensor weights, ids;
    route(w, normed, tokens, routing_layer, weights, ids);
    backend_.moe_experts(normed, w.gate_up, w.down, ids, weights, layout_.first_expert(spec_), out);
  }
}

bool Qwen3MoeModel::mlp_output_partial(const LayerWeights& w) const {
  return comm_.size() > 1 && !(w.moe && layout_.all_to_all);
}

void Qwen3MoeModel::mlp_then_norm(const LayerWeights& w, Tensor residual, Tensor normed, Tensor out,
                                  int tokens, int routing_layer, Tensor next_norm, Tensor next_out,
                                  Tensor weights, Tensor ids) {
  const float eps = static_cast<float>(spec_.rms_norm_eps);
  if (w.moe && !layout_.all_to_all && !mlp_output_partial(w)) {
    if (ids.data == nullptr) route(w, normed, tokens, routing_layer, weights, ids);
    backend_.moe_experts_add_rmsnorm(normed, w.gate_up, w.down, ids, weights, layout_.first_expert(spec_),
                                     out, residual, next_norm, eps, next_out);
    return;
  }
  mlp_forward(w, normed, out, tokens, routing_layer);
  reduce_add_rmsnorm(residual, out, next_norm, eps, next_out, mlp_output_partial(w));
}

void Qwen3MoeModel::layer_forward(const LayerWeights& w, KvCacheLayer cache, const AttentionMeta& meta,
                                  int tokens, int routing_layer, Tensor next_norm, Tensor next_out) {
  const float eps = static_cast<float>(spec_.rms_norm_eps);
  Tensor residual = residual_.rows(0, tokens), normed = normed_.rows(0, tokens), proj = proj_.rows(0, tokens);
  Tensor qkv = qkv_.rows(0, tokens), q = q_.rows(0, tokens), attn = attn_.rows(0, tokens);
  backend_.linear(normed, w.qkv, qkv);
  backend_.qk_norm_rope_attention_linear(qkv, q_heads_, kv_heads_, w.q_norm, w.k_norm, eps, rope_,
                                         1.0f / std::sqrt(static_cast<float>(spec_.head_dim)), meta, cache, q,
                                         attn, w.o_proj, proj);
  Tensor weights, ids;  // set where the MoE's router runs with the norm before it
  if (w.moe && !layout_.all_to_all && comm_.size() == 1) {  // one rank: the MoE's norm goes with its router
    Tensor logits = routing_outputs(tokens, routing_layer, weights, ids);
    backend_.add_rmsnorm_route(residual, proj, w.post_norm, eps, normed, w.router, logits,
                               spec_.num_experts_per_tok, spec_.norm_topk_prob, weights, ids);
  } else {
    reduce_add_rmsnorm(residual, proj, w.post_norm, eps, normed, true);
  }
  mlp_then_norm(w, residual, normed, proj, tokens, routing_layer, next_norm, next_out, weights, ids);
}

void Qwen3MoeModel::compute(const StepShape& shape) {
  const AttentionMeta meta = attention_meta(shape);
  const SamplingInputs sampling = sampling_inputs(shape);
  const int tokens = shape.tokens, rows = shape.rows, groups = shape.groups;
  const float eps = static_cast<float>(spec_.rms_norm_eps);

  Tensor ids = input(off_ids_, DType::kI32, tokens);
  if (options_.num_speculative_tokens > 0)
    backend_.resolve_tokens(ids, draft_table_);  // device-resident drafts
  backend_.embedding(ids, weights_.embed, layout_.vocab_begin(spec_), residual_.rows(0, tokens));
  all_reduce(residual_.rows(0, tokens));  // vocab-parallel embedding: each rank filled its own rows
  backend_.rmsnorm(residual_.rows(0, tokens), weights_.layers[0].input_norm, eps, normed_.rows(0, tokens));
  for (int l = 0; l < spec_.num_layers; ++l) {
    const bool last = l + 1 == spec_.num_layers;
    layer_forward(weights_.layers[l], kv_[l], meta, tokens, l,
                  last ? weights_.final_norm : weights_.layers[l + 1].input_norm, normed_.rows(0, tokens));
  }
  if (rows > 0) {
    Tensor sample_rows = input(off_rows_, DType::kI32, rows);
    Tensor hidden = sample_hidden_.rows(0, rows), logits = logits_.rows(0, rows);
    backend_.gather_rows(normed_.rows(0, tokens), sample_rows, hidden);
    const Candidates cand =
        lm_head_candidates(hidden, rows, sampling.temperature, logits, shape.adjustments, shape.masks);
    Tensor emitted = emitted_.rows(0, rows);
    if (shape.speculative) {
      Tensor row_tokens = row_tokens_.rows(0, rows);
      backend_.gather_rows(ids.view({tokens, 1}), sample_rows, row_tokens.view({rows, 1}));
      backend_.verify_and_sample(cand.values, cand.ids, cand.stats, sampling, row_tokens,
                                 input(off_group_start_, DType::kI32, groups + 1), emitted,
                                 accepted_.rows(0, groups));
    } else {
      backend_.sample(cand.values, cand.ids, cand.stats, sampling, emitted);
    }
    if (shape.logprobs) logprob_candidates(rows);  // before the draft steps reuse the logits
  }
  if (shape.mtp) mtp_forward(shape, meta);
}

StepResult Qwen3MoeModel::forward(const StepBatch& batch, bool want_logits) {
  const auto start = std::chrono::steady_clock::now();
  TPS_CHECK(!want_logits || options_.keep_logits,
            "logits were asked for but ModelOptions::keep_logits is off");
  TPS_CHECK(batch.num_tokens() > 0, "empty step");
  const int bucket = want_logits ? -1 : graph_bucket(batch);
  const StepShape shape = upload(bucket >= 0 ? pad_to(batch, bucket) : batch);
  last_tokens_ = shape.tokens;
  last_real_tokens_ = batch.num_tokens();
  if (bucket >= 0) {
    graphs_.at(bucket)->replay();
    ++graph_replays_;
  } else {
    compute(shape);
  }
  last_enqueue_s_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  // The only synchronisation of a step: the drawn tokens (and accepted counts) of the real rows.
  StepResult result;
  const int rows = batch.num_samples();
  if (rows == 0) return result;
  if (shape.speculative) {
    const int64_t R = emitted_.dim(0), groups = batch.num_groups();
    result.tokens.resize(static_cast<size_t>(R + groups));  // [emitted R | accepted groups], one copy
    backend_.copy_to_host(result.tokens.data(), step_results_.rows(0, R + groups));
    result.accepted.assign(result.tokens.begin() + R, result.tokens.end());
    result.tokens.resize(rows);
  } else {
    result.tokens.resize(rows);
    backend_.copy_to_host(result.tokens.data(), emitted_.rows(0, rows));
  }
  if (shape.logprobs) result.logprobs = logprobs_of(batch, result.tokens);
  if (want_logits) {
    const int64_t v = layout_.local_vocab(spec_), P = layout_.tp_size;
    Tensor logits = logits_.rows(0, rows);
    std::vector<float> gathered(static_cast<size_t>(P * rows * v));
    if (P > 1) {
      Tensor all = all_logits_.view({P, rows, v});
      comm_.all_gather(logits.data, all.data, static_cast<size_t>(rows * v), DType::kF32);
      backend_.copy_to_host(gathered.data(), all);
    } else {
      backend_.copy_to_host(gathered.data(), logits);
    }
    result.logits.resize(static_cast<size_t>(rows) * spec_.vocab_size);
    for (int64_t p = 0; p < P; ++p)
      for (int64_t r = 0; r < rows; ++r)
        std::copy_n(gathered.begin() + (p * rows + r) * v, v,
                    result.logits.begin() + r * spec_.vocab_size + p * v);
  }
  return result;
}

int64_t Qwen3MoeModel::routing_width(int64_t tokens) const {
  const int64_t P = layout_.tp_size, k = std::max(spec_.num_experts_per_tok, 1);
  return layout_.all_to_all ? P * ((tokens + P - 1) / P) * k : tokens * k;
}

RoutingStats Qwen3MoeModel::last_step_routing() const {
  TPS_CHECK(options_.record_routing, "routing statistics need ModelOptions::record_routing");
  RoutingStats stats;
  stats.tokens = last_real_tokens_;
  stats.experts_hit.resize(spec_.num_layers);
  // Under all-to-all dispatch the recorded ids are this rank's local experts (-1 marks unused rows).
  const int32_t offset = layout_.all_to_all ? layout_.first_expert(spec_) : 0;
  // What each layer's row holds after a step of T rows (a replayed graph: its bucket's, padding included).
  // Padding rows come after the step's own and route too; without all-to-all a row's k ids lie in order,
  // so only the step's own are counted. (All-to-all records what each rank received, padding included.)
  const int64_t length = routing_width(last_tokens_);
  const int64_t counted =
      layout_.all_to_all ? length : int64_t(last_real_tokens_) * std::max(spec_.num_experts_per_tok, 1);
  std::vector<int32_t> ids(static_cast<size_t>(length));
  std::vector<char> hit(static_cast<size_t>(std::max(spec_.num_experts, 1)));
  for (int l = 0; l < spec_.num_layers; ++l) {
    if (!weights_.layers[l].moe || ids.empty()) continue;
    backend_.copy_to_host(ids.data(), routing_ids_.rows(l, l + 1).view({length}));
    std::fill(hit.begin(), hit.end(), 0);
    for (int64_t i = 0; i < counted; ++i)
      if (ids[i] >= 0) hit.at(static_cast<size_t>(ids[i] + offset)) = 1;
    for (size_t e = 0; e < hit.size(); ++e)
      if (hit[e]) stats.experts_hit[l].push_back(static_cast<int32_t>(e));
  }
  return stats;
}

}  // namespace tpserve
