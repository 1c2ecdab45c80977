// ShardLayout: which part of the model this rank holds (pure numbers; the parallel layer fills it in from
// the topology). Attention heads, the vocabulary and dense MLPs are split over tp ranks; experts are either
// split in their intermediate dimension (TP-sharded MoE) or partitioned over ep ranks.
#pragma once

#include "runtime/model/model_spec.h"

namespace tpserve {

struct ShardLayout {
  int tp_rank = 0;
  int tp_size = 1;
  int ep_rank = 0;
  int ep_size = 1;
  bool expert_parallel = false;  // experts partitioned (moe.parallel: ep)
  bool all_to_all = false;       // EP dispatch through all-to-all (else all-reduce)

  // Attention heads of this rank. KV heads are replicated when tp > num_key_value_heads.
  int local_q_heads(const ModelSpec& s) const { return s.num_attention_heads / tp_size; }
  int local_kv_heads(const ModelSpec& s) const {
    return s.num_key_value_heads >= tp_size ? s.num_key_value_heads / tp_size : 1;
  }
  int first_kv_head(const ModelSpec& s) const {
    return s.num_key_value_heads >= tp_size ? tp_rank * local_kv_heads(s)
                                            : tp_rank / (tp_size / s.num_key_value_heads);
  }
  int local_vocab(const ModelSpec& s) const { return s.vocab_size / tp_size; }
  int vocab_begin(const ModelSpec& s) const { return tp_rank * local_vocab(s); }
  int local_experts(const ModelSpec& s) const {
    return expert_parallel ? s.num_experts / ep_size : s.num_experts;
  }
  int first_expert(const ModelSpec& s) const { return expert_parallel ? ep_rank * local_experts(s) : 0; }
  // Expert intermediate columns held per expert (the whole width under EP).
  int local_moe_intermediate(const ModelSpec& s) const {
    return expert_parallel ? s.moe_intermediate_size : s.moe_intermediate_size / tp_size;
  }
  int local_dense_intermediate(const ModelSpec& s) const { return s.intermediate_size / tp_size; }
};

}  // namespace tpserve
