// Qwen3MoeModel: the Qwen3-MoE forward, written once against Backend (ops) and Communicator (collectives).
// Nothing here knows CUDA or MPI. A step: embed -> per layer [RMSNorm -> QKV -> q/k norm + RoPE + KV append ->
// attention -> O (row-parallel) -> all-reduce -> add + RMSNorm -> router -> top-k -> experts (or dense MLP)
// -> all-reduce] -> final norm -> lm_head on this rank's vocabulary slice -> candidates -> all-gather -> draw.
// All buffers are allocated at construction for the largest step; a step allocates nothing.
#pragma once

#include "parallel/communicator.h"
#include "runtime/backend/backend.h"
#include "runtime/model/model_weights.h"
#include "runtime/model/routing_stats.h"
#include "runtime/model/step_batch.h"

namespace tpserve {

struct ModelOptions {
  int max_tokens = 512;          // tokens per step (prefill chunk or decode batch x (1 + k))
  int max_seqs = 16;             // sequences per step
  int max_samples = 16;          // rows sampled per step
  int max_blocks_per_seq = 64;   // block-table width
  int num_kv_blocks = 64;        // paged KV cache size
  int kv_block_size = 16;
  int sampling_candidates = 256; // per rank and row; top-p works within the best of these
  bool keep_logits = false;      // allow StepResult::logits (tests)
  bool record_routing = false;   // keep every MoE layer's expert ids for last_step_routing() (benchmarks)
};

class Qwen3MoeModel {
 public:
  Qwen3MoeModel(const ModelSpec& spec, const ShardLayout& layout, ModelWeights weights, const ModelOptions& options,
                Backend& backend, parallel::Communicator& comm);

  StepResult forward(const StepBatch& batch, bool want_logits = false);

  const ModelSpec& spec() const { return spec_; }
  const ShardLayout& layout() const { return layout_; }
  const ModelOptions& options() const { return options_; }
  size_t weight_bytes() const { return weights_.bytes; }
  size_t kv_cache_bytes() const { return kv_bytes_; }
  // The experts each layer selected in the last forward (needs ModelOptions::record_routing). Copies the
  // recorded ids to the host and counts them: call it after the step, outside any timed region.
  RoutingStats last_step_routing() const;

 private:
  struct StepInputs;
  void upload(const StepBatch& batch, AttentionMeta& meta, SamplingInputs& sampling);
  void layer_forward(int layer, const AttentionMeta& meta, int tokens);
  void mlp_forward(int layer, Tensor normed, Tensor out, int tokens);
  void moe_all_to_all(int layer, Tensor normed, Tensor out, int tokens);
  void all_reduce(Tensor t);

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
      off_topp_, off_minp_, off_seed_, off_counter_;

  // Workspace.
  Tensor residual_, normed_, qkv_, q_, attn_, proj_, router_logits_, topk_w_, topk_ids_, gate_up_, act_;
  Tensor sample_hidden_, logits_, cand_vals_, cand_ids_, cand_stats_, all_vals_, all_ids_, all_stats_, tokens_;
  Tensor all_logits_;
  // Expert-parallel all-to-all dispatch (allocated only for that layout).
  Tensor a2a_send_x_, a2a_send_expert_, a2a_recv_x_, a2a_recv_expert_, a2a_results_, a2a_back_, a2a_origin_,
      a2a_slice_out_;
  // Routing record (ModelOptions::record_routing): per layer the top-k ids [T * k], or under all-to-all
  // dispatch the expert ids received [P * cap]; the last step's sizes say how much of each row is valid.
  Tensor routing_ids_;
  int last_tokens_ = 0;
  int64_t last_routing_ids_ = 0;
};

}  // namespace tpserve
