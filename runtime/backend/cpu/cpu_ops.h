// The larger float32 reference ops of the CPU backend, as free functions on host tensors (the backend
// class forwards to them). Every tensor here is f32 except ids/positions/tables (i32) and seeds (i64).
#pragma once

#include "runtime/backend/backend.h"

namespace tpserve::cpu {

void qk_norm_rope_kv(Tensor qkv, int num_q_heads, int num_kv_heads, Tensor q_norm_w, Tensor k_norm_w,
                     float eps, const RopeConfig& rope, const AttentionMeta& meta, KvCacheLayer cache,
                     Tensor q_out);
void attention(Tensor q, int num_q_heads, int num_kv_heads, float scale, KvCacheLayer cache,
               const AttentionMeta& meta, Tensor out);
void topk_gating(Tensor router_logits, int k, bool renormalize, Tensor weights, Tensor ids);
void moe_experts(Tensor x, Tensor gate_up, Tensor down, Tensor topk_ids, Tensor topk_weights,
                 int expert_begin, Tensor out);
void moe_pack(Tensor x, Tensor topk_ids, int experts_per_rank, Tensor send_x, Tensor send_expert,
              Tensor origin);
void moe_experts_rows(Tensor rows, Tensor expert_ids, Tensor gate_up, Tensor down, Tensor out);
void moe_combine(Tensor results, Tensor origin, Tensor topk_weights, Tensor out);
void sampling_candidates(Tensor logits, int64_t vocab_begin, Tensor temperature, Tensor values, Tensor ids,
                         Tensor stats);
void adjust_logits(Tensor logits, int64_t vocab_begin, Tensor targets, Tensor values);
void mask_logits(Tensor logits, int64_t vocab_begin, Tensor rows, Tensor masks);
void sample(Tensor values, Tensor ids, Tensor stats, const SamplingInputs& params, Tensor tokens);
void verify_and_sample(Tensor values, Tensor ids, Tensor stats, const SamplingInputs& params,
                       Tensor row_tokens, Tensor group_start, Tensor emitted, Tensor accepted);

// Shared helpers.
void rmsnorm_row(const float* x, const float* w, float eps, int n, float* out);
// out[n] = w[n, k] . x[k] for one row.
void matvec(const float* w, const float* x, int64_t n, int64_t k, float* out);

}  // namespace tpserve::cpu
