// Qwen3MoeModel: the Qwen3-MoE forward, written once against Backend (ops) and Communicator (collectives).
// Nothing here knows CUDA or MPI. A step: embed -> per layer [RMSNorm -> QKV -> q/k norm + RoPE + KV append
// -> attention -> O (row-parallel) -> all-reduce -> add + RMSNorm -> router -> top-k -> experts (or dense
// MLP)
// -> all-reduce] -> final norm -> lm_head on this rank's vocabulary slice -> candidates -> all-gather ->
// draw. All buffers are allocated at construction for the largest step; a step allocates nothing.
#pragma once

#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "parallel/communicator.h"
#include "runtime/backend/backend.h"
#include "runtime/model/model_weights.h"
#include "runtime/model/routing_stats.h"
#include "runtime/model/step_batch.h"

namespace tpserve {

struct ModelOptions {
  int max_tokens = 512;         // tokens per step (prefill chunk or decode batch x (1 + k))
  int max_seqs = 16;            // sequences per step
  int max_samples = 16;         // rows sampled per step
  int max_blocks_per_seq = 64;  // block-table width
  // Paged KV cache size; 0 = from the backend's memory left, up to max_seqs full sequences.
  int num_kv_blocks = 64;
  int kv_block_size = 16;
  int sampling_candidates = 256;   // per rank and row; top-p works within the best of these
  int num_speculative_tokens = 0;  // k drafts per sequence and step (MTP or scripted drafts)
  int max_logit_adjustments = 0;   // StepBatch::logit_adjustments a step may carry
  int max_token_masks = 0;         // StepBatch::mask_rows a step may carry (structured output)
  bool keep_logits = false;        // allow StepResult::logits (tests)
  bool record_routing = false;     // keep every MoE layer's expert ids for last_step_routing() (benchmarks)
};

class Qwen3MoeModel {
 public:
  Qwen3MoeModel(const ModelSpec& spec, const ShardLayout& layout, ModelWeights weights,
                const ModelOptions& options, Backend& backend, parallel::Communicator& comm);

  StepResult forward(const StepBatch& batch, bool want_logits = false);
  // Best logits kept per rank and row (runtime.sampling_candidates, at most a rank's vocabulary slice):
  // every drawn token is among them, and so are the top log-probabilities a request may ask for.
  int sampling_candidates() const { return candidates_; }

  // CUDA graphs: captures one graph per decode batch size (ascending; every rank in the same order, after
  // an eager warm-up of the same shape). Decode-only steps are then padded to the next size and replayed.
  // Returns false where the backend has no graphs (the CPU): steps then run eagerly.
  bool capture_graphs(std::vector<int> batch_sizes);
  // Without graphs: one eager decode step of `batch_size` padding sequences, waited for, so that what the
  // backend cannot run (a shape outside its kernels' limits, memory it cannot find) fails at load rather
  // than at the first request. Every rank runs it (it may hold collectives).
  void warm_up(int batch_size);
  // Per captured batch size, what its graph holds.
  std::vector<std::pair<int, GraphReport>> graph_reports() const;
  int64_t graph_replays() const { return graph_replays_; }
  // Host seconds the last forward() took until its work was enqueued (before waiting for the results).
  double last_enqueue_seconds() const { return last_enqueue_s_; }

  bool has_mtp() const { return weights_.mtp.present; }
  // Token id standing for draft j (0-based) of the sequence in draft-table slot `slot`
  // (StepBatch::token_ids).
  int32_t device_draft_token(int slot, int j) const { return -(1 + j * options_.max_seqs + slot); }
  // The k drafts the MTP head left for a draft-table slot (tests, debugging: copies to the host).
  std::vector<int32_t> drafts_of_slot(int slot) const;
  // Test access to one layer's KV cache (the main model's; layer -1: the MTP layer's).
  KvCacheLayer kv_cache(int layer) const { return layer < 0 ? mtp_kv_ : kv_[layer]; }
  Backend& backend() { return backend_; }

  const ModelSpec& spec() const { return spec_; }
  const ShardLayout& layout() const { return layout_; }
  // num_kv_blocks is the count allocated (resolved when the options asked for 0).
  const ModelOptions& options() const { return options_; }
  size_t weight_bytes() const { return weights_.bytes; }
  size_t kv_cache_bytes() const { return kv_bytes_; }
  // The experts each layer selected in the last forward (needs ModelOptions::record_routing). Copies the
  // recorded ids to the host and counts them: call it after the step, outside any timed region.
  RoutingStats last_step_routing() const;

 private:
  struct Candidates {
    Tensor values, ids, stats;  // [P, n, C], [P, n, C], [P, n, 2]: every rank's
  };
  // The sizes of a step: everything the device work depends on besides the uploaded inputs.
  struct StepShape {
    int tokens = 0, rows = 0, groups = 0, seqs = 0;
    bool speculative = false;  // sampled rows come in verification groups
    bool mtp = false;          // the MTP head runs (mtp_next_tokens given)
    bool logprobs = false;     // a row asks for log-probabilities (eager steps only)
    int adjustments = 0;       // logit adjustments uploaded (eager steps only)
    int masks = 0;             // token masks uploaded (eager steps only)
    int max_query_len = 0, max_context_len = 0;
  };
  StepShape upload(const StepBatch& batch);
  AttentionMeta attention_meta(const StepShape& shape) const;
  SamplingInputs sampling_inputs(const StepShape& shape) const;
  void compute(const StepShape& shape);  // all device work of a step: capturable
  // The batch padded to a captured graph's size (rows of padding sequences in the padding KV block), or
  // -1 when the step is not a decode step that a graph covers.
  int graph_bucket(const StepBatch& batch) const;
  StepBatch pad_to(const StepBatch& batch, int size) const;
  StepBatch padding_batch(int size) const;
  // padding_batch(size) uploaded (attention planned for any context) and run eagerly, waited for.
  StepShape run_padding_step(int size);
  Tensor input(size_t offset, DType dtype, int64_t n) const;  // a typed view of the step-input buffer
  // lm_head on this rank's vocabulary slice, the step's first `adjustments` logit adjustments and first
  // `masks` token masks, then every rank's best candidates (all-gathered under TP).
  Candidates lm_head_candidates(Tensor hidden, int n, Tensor temperature, Tensor logits_out,
                                int adjustments = 0, int masks = 0);
  // Checks the batch's logit adjustments and copies them to the device (qwen3_moe_logit_adjust.cc);
  // returns how many.
  int upload_logit_adjustments(const StepBatch& batch);
  // Checks the batch's token masks and copies them to the device (qwen3_moe_logit_adjust.cc); returns
  // how many.
  int upload_token_masks(const StepBatch& batch);
  // The C best logits of this rank's slice of n rows and their stats into `mine` ([R, C], [R, C], [R, 2]),
  // then every rank's into `all` ([P, R, C], ...; used with several ranks).
  Candidates candidates(Tensor logits, int n, Tensor temperature, const Candidates& mine,
                        const Candidates& all);
  // The step's log-probabilities (qwen3_moe_logprobs.cc): raw candidates of the sampled rows on the
  // device (in compute), then their merge on the host.
  void logprob_candidates(int rows);
  std::vector<TokenLogprobs> logprobs_of(const StepBatch& batch, const std::vector<int32_t>& tokens);
  void mtp_input(Tensor tokens, Tensor hidden, int n);
  void mtp_forward(const StepShape& shape, const AttentionMeta& meta);
  // Sizes (options_.num_kv_blocks == 0: from memory, the same count on every rank) and allocates the KV
  // cache: last in the constructor, after everything else the model allocates.
  void allocate_kv_cache();
  // One decoder layer on residual_ (its input; normed_ holds rmsnorm(residual_) * w.input_norm). It ends
  // with the next norm: residual_ += the MLP's output, next_out = rmsnorm(residual_) * next_norm (the next
  // layer's input norm, or a final norm). routing_layer: the row of the routing record
  // (ModelOptions::record_routing) this layer writes; -1: none.
  void layer_forward(const LayerWeights& w, KvCacheLayer cache, const AttentionMeta& meta, int tokens,
                     int routing_layer, Tensor next_norm, Tensor next_out);
  // Routing-record row length for a step of `tokens` rows: the top-k ids of every row, or under all-to-all
  // dispatch the expert ids of a full exchange (P equal slices of k slots per token).
  int64_t routing_width(int64_t tokens) const;
  // The tensors a MoE layer's routing of `tokens` rows fills: the router's logits (returned), the top-k
  // weights and ids (ids in the routing record's row where one is kept).
  Tensor routing_outputs(int tokens, int routing_layer, Tensor& weights, Tensor& ids);
  // The router and top-k gating of a MoE layer into routing_outputs().
  void route(const LayerWeights& w, Tensor normed, int tokens, int routing_layer, Tensor& weights,
             Tensor& ids);
  void mlp_forward(const LayerWeights& w, Tensor normed, Tensor out, int tokens, int routing_layer);
  // mlp_forward into out, then residual += out (summed over the ranks where partial) and next_out =
  // rmsnorm(residual) * next_norm; one backend op for a local MoE (Backend::moe_experts_add_rmsnorm), whose
  // routing is `weights` and `ids` where the router already ran (Backend::add_rmsnorm_route), else route().
  void mlp_then_norm(const LayerWeights& w, Tensor residual, Tensor normed, Tensor out, int tokens,
                     int routing_layer, Tensor next_norm, Tensor next_out, Tensor weights = {},
                     Tensor ids = {});
  // Whether the MLP of `w` leaves this rank's partial sums in proj_ (TP-sharded intermediate, or experts held
  // elsewhere), which the add_rmsnorm reading them sums first; all-to-all dispatch gathers whole rows.
  bool mlp_output_partial(const LayerWeights& w) const;
  void moe_all_to_all(const LayerWeights& w, Tensor normed, Tensor out, int tokens, int routing_layer);
  void all_reduce(Tensor t);
  // residual += x; out = rmsnorm(residual) * w; with `partial`, x is first summed over the ranks (in the same
  // kernel where the communicator can fuse them).
  void reduce_add_rmsnorm(Tensor residual, Tensor x, Tensor w, float eps, Tensor out, bool partial);

  ModelSpec spec_;
  ShardLayout layout_;
  ModelWeights weights_;
  ModelOptions options_;
  Backend& backend_;
  parallel::Communicator& comm_;
  int q_heads_, kv_heads_, candidates_;
  RopeConfig rope_;
  std::vector<KvCacheLayer> kv_;
  size_t kv_bytes_ = 0;

  // Step inputs: one host staging buffer and one backend buffer with fixed offsets (one copy per step).
  std::vector<char> host_inputs_;
  Tensor inputs_;
  size_t off_ids_, off_pos_, off_slots_, off_qstart_, off_ctx_, off_tables_, off_rows_, off_temp_, off_topk_,
      off_topp_, off_minp_, off_seed_, off_counter_, off_group_start_, off_base_row_, off_base_pos_,
      off_group_seq_, off_draft_index_, off_mtp_next_, off_iota_;

  // Workspace.
  Tensor residual_, normed_, qkv_, q_, attn_, proj_, router_logits_, topk_w_, topk_ids_, gate_up_, act_;
  Tensor sample_hidden_, logits_, cand_vals_, cand_ids_, cand_stats_, all_vals_, all_ids_, all_stats_;
  Tensor all_logits_;
  // keep_logits with the MTP head: the draft steps' logits, kept apart from the step's own (logits_).
  Tensor draft_logits_;  // [S, local vocab] f32
  // Log-probabilities: temperature 1 for every row, and the raw candidates (this rank's and every rank's).
  Tensor ones_;                    // [R] f32
  Candidates raw_mine_, raw_all_;  // [R, C] / [R, C] / [R, 2], and every rank's [P, R, C] / ... / [P, R, 2]
  // Logit adjustments of the step (E = options_.max_logit_adjustments), copied only when a step has some.
  Tensor adjust_targets_;  // [E, 2] i32: row, token
  Tensor adjust_values_;   // [E, 3] f32: bias, scale, subtract
  std::vector<int32_t> host_adjust_targets_;
  std::vector<float> host_adjust_values_;
  // Token masks of the step (M = options_.max_token_masks, W = mask_words(vocab)), copied only when a step
  // has some.
  Tensor mask_rows_;    // [M] i32: sampled row
  Tensor token_masks_;  // [M, W] i32: bit t % 32 of word t / 32 set = token t allowed
  // Speculative decoding and the MTP head.
  Tensor row_tokens_, step_results_, emitted_, accepted_, draft_table_, mtp_a_, mtp_b_, mtp_h_, draft_tokens_,
      draft_rows_, draft_pos_, draft_slots_, draft_ctx_, draft_tables_;
  SamplingInputs greedy_;
  KvCacheLayer mtp_kv_;
  // Expert-parallel all-to-all dispatch (allocated only for that layout).
  Tensor a2a_send_x_, a2a_send_expert_, a2a_recv_x_, a2a_recv_expert_, a2a_results_, a2a_back_, a2a_origin_,
      a2a_slice_out_;
  // Routing record (ModelOptions::record_routing): per layer the top-k ids [T * k], or under all-to-all
  // dispatch the expert ids received [P * cap]; the last step's sizes say how much of each row is valid.
  Tensor routing_ids_;
  // Graphs by batch size; padding rows write their KV to one extra block.
  std::map<int, std::unique_ptr<StepGraph>> graphs_;
  int64_t graph_replays_ = 0;
  double last_enqueue_s_ = 0;
  int last_tokens_ = 0;       // rows of the last forward (a replayed graph's: its bucket's)
  int last_real_tokens_ = 0;  // of them, the step's own (the rest are graph padding)
};

}  // namespace tpserve
