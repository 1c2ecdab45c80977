// CudaBackend attention ops: q/k norm + RoPE + KV append, and paged attention (decode with context splits,
// merged in the kernel by the last split of each tile, or for one token by the O projection after it;
// prefill tiled over query tokens); for decode steps the two as one launch (the prologue folded into the
// tensor-core kernel).
#include <algorithm>

#include "kernels/paged_attention.h"
#include "kernels/qk_norm_rope_kv.h"
#include "runtime/backend/cuda/cuda_backend.h"
#include "runtime/backend/cuda/device_memory.h"
#include "runtime/backend/cuda/tensor_checks.h"

namespace tpserve {

using cuda_ops::bf16_mut;
using cuda_ops::bf16_ptr;
using cuda_ops::expect;
using cuda_ops::to_int;

namespace {
void expect_cache(const KvCacheLayer& cache, int num_kv_heads, int head_dim, const char* op) {
  expect(cache.k, DType::kBF16, op, "k cache");
  expect(cache.v, DType::kBF16, op, "v cache");
  TPS_CHECK(cache.k.ndim == 4 && cache.k.dim(2) == num_kv_heads && cache.k.dim(3) == head_dim &&
                cache.v.numel() == cache.k.numel(),
            op, ": cache ", cache.k.shape_string(), " for ", num_kv_heads, " KV heads of ", head_dim);
}

// The q/k norm + RoPE + KV append's inputs (qk_norm_rope_kv, and the same folded into attention).
void expect_qk_norm(Tensor qkv, int num_q_heads, int num_kv_heads, Tensor q_norm_w, Tensor k_norm_w,
                    const RopeConfig& rope, const AttentionMeta& meta, const KvCacheLayer& cache,
                    const char* op) {
  const int d = rope.head_dim;
  expect(qkv, DType::kBF16, op, "qkv");
  expect(q_norm_w, DType::kBF16, op, "q norm weight");
  expect(k_norm_w, DType::kBF16, op, "k norm weight");
  expect(meta.positions, DType::kI32, op, "positions");
  expect(meta.slot_mapping, DType::kI32, op, "slot mapping");
  expect_cache(cache, num_kv_heads, d, op);
  TPS_CHECK(d > 0 && d % 2 == 0 && d <= kernels::kRopeMaxHeadDim, op, ": head_dim ", d,
            " must be even, at most ", kernels::kRopeMaxHeadDim);
  TPS_CHECK(qkv.ndim == 2 && qkv.dim(1) == int64_t(num_q_heads + 2 * num_kv_heads) * d, op, ": qkv ",
            qkv.shape_string(), " for ", num_q_heads, " + 2 x ", num_kv_heads, " heads of ", d);
}
}  // namespace

void CudaBackend::qk_norm_rope_kv(Tensor qkv, int num_q_heads, int num_kv_heads, Tensor q_norm_w,
                                  Tensor k_norm_w, float eps, const RopeConfig& rope,
                                  const AttentionMeta& meta, KvCacheLayer cache, Tensor q_out) {
  const char* op = "qk_norm_rope_kv";
  expect_qk_norm(qkv, num_q_heads, num_kv_heads, q_norm_w, k_norm_w, rope, meta, cache, op);
  expect(q_out, DType::kBF16, op, "q out");
  kernels::QkNormRopeKvParams p;
  p.qkv = bf16_ptr(qkv);
  p.q_norm_weight = bf16_ptr(q_norm_w);
  p.k_norm_weight = bf16_ptr(k_norm_w);
  p.positions = meta.positions.ptr<int32_t>();
  p.slot_mapping = meta.slot_mapping.ptr<int32_t>();
  p.q_out = bf16_mut(q_out);
  p.k_cache = bf16_mut(cache.k);
  p.v_cache = bf16_mut(cache.v);
  p.tokens = to_int(qkv.dim(0), "tokens");
  p.num_q_heads = num_q_heads;
  p.num_kv_heads = num_kv_heads;
  p.head_dim = rope.head_dim;
  p.eps = eps;
  p.loads_before_wait = options_.kernels.norm_loads_before_wait;
  kernels::set_rope_inv_freq(p.inv_freq, p.head_dim, rope.theta);
  kernels::launch_qk_norm_rope_kv(p, stream_, *policy_);
}

kernels::PagedAttentionParams CudaBackend::attention_params(int num_q_heads, int num_kv_heads, float scale,
                                                            const KvCacheLayer& cache,
                                                            const AttentionMeta& meta, Tensor out,
                                                            const char* op) const {
  const int d = static_cast<int>(cache.k.dim(3));
  expect(out, DType::kBF16, op, "out");
  expect(meta.positions, DType::kI32, op, "positions");
  expect(meta.query_start, DType::kI32, op, "query_start");
  expect(meta.block_tables, DType::kI32, op, "block tables");
  expect_cache(cache, num_kv_heads, d, op);
  TPS_CHECK(d == 32 || d == 64 || d == 128, op, ": head_dim ", d, " (32, 64 or 128 supported)");
  TPS_CHECK(num_kv_heads > 0 && num_q_heads % num_kv_heads == 0 &&
                num_q_heads / num_kv_heads <= kernels::kAttentionMaxGroup,
            op, ": ", num_q_heads, " query heads over ", num_kv_heads, " KV heads (group at most ",
            kernels::kAttentionMaxGroup, ")");
  TPS_CHECK(out.dim(-1) == int64_t(num_q_heads) * d, op, ": out ", out.shape_string(), " for ", num_q_heads,
            " heads of ", d);
  kernels::PagedAttentionParams p;
  p.k_cache = bf16_ptr(cache.k);
  p.v_cache = bf16_ptr(cache.v);
  p.positions = meta.positions.ptr<int32_t>();
  p.query_start = meta.query_start.ptr<int32_t>();
  p.block_tables = meta.block_tables.ptr<int32_t>();
  p.out = bf16_mut(out);
  p.num_seqs = meta.num_seqs;
  p.num_q_heads = num_q_heads;
  p.num_kv_heads = num_kv_heads;
  p.head_dim = d;
  p.block_size = to_int(cache.k.dim(1), "block size");
  p.max_blocks_per_seq = to_int(meta.block_tables.dim(1), "blocks per sequence");
  p.max_query_len = meta.max_query_len;
  p.scale = scale;
  p.tensor_cores = options_.kernels.attention_tensor_cores;
  p.inputs_before_wait = options_.kernels.attention_inputs_before_wait;
  p.kv_before_wait = options_.kernels.attention_kv_before_wait;
  p.trigger_after_keys = options_.kernels.attention_trigger_after_keys;
  p.key_rows = options_.kernels.attention_one_token_key_rows;
  p.dim_split = options_.kernels.attention_one_token_dim_split;
  p.prologue_loads_first = options_.kernels.attention_prologue_loads_first;
  p.split_keys = options_.kernels.attention_split_keys;
  p.split_growth = options_.kernels.attention_split_growth;
  p.merge_one_level_max = options_.kernels.attention_merge_one_level_max;
  p.split_min_keys = options_.kernels.attention_split_min_keys;
  p.arrival_acq_rel = options_.kernels.attention_arrival_acq_rel;
  if (!p.tensor_cores)  // the CUDA-core kernel's ranges are whole 32-key tiles
    p.split_keys = (p.split_keys + kernels::kAttentionCudaCoreSplitKeys - 1) /
                   kernels::kAttentionCudaCoreSplitKeys * kernels::kAttentionCudaCoreSplitKeys;
  return p;
}

kernels::AttentionPartials CudaBackend::launch_attention(kernels::PagedAttentionParams& p,
                                                         const AttentionMeta& meta, int tokens,
                                                         int defer_merge_max_ranges) {
  p.ranges_outermost = tokens <= options_.kernels.attention_ranges_outermost_max_tokens;
  kernels::plan_decode_splits(p, meta.max_context_len, tokens, num_sms_,
                              scratch_->bytes() - 2 * DeviceArena::kAlignment,
                              attention_blocks_per_sm_[head_dim_slot(p.head_dim)]);
  ScratchRegion::Cursor scratch(*scratch_);
  kernels::AttentionPartials partials;
  if (p.num_splits > 1) {
    p.partial_out = scratch.take<float>(size_t(tokens) * p.num_q_heads * p.num_splits * p.head_dim,
                                        "attention partial sums");
    p.partial_max_sum =
        scratch.take<float>(size_t(tokens) * p.num_q_heads * p.num_splits * 2, "attention partial max");
    p.split_counters = attention_split_counters_;
    p.split_counter_capacity = attention_split_counter_capacity_;
    p.defer_merge_max_ranges = defer_merge_max_ranges;
    p.defer_merge_groups = defer_merge_max_ranges > 0 && options_.kernels.attention_merge_in_o_groups;
    if (defer_merge_max_ranges > 0)
      partials = {.out = p.partial_out,
                  .max_sum = p.partial_max_sum,
                  .positions = p.positions,
                  .heads = p.num_q_heads,
                  .head_dim = p.head_dim,
                  .num_splits = p.num_splits,
                  .split_keys = p.split_keys,
                  .split_growth = p.split_growth,
                  .split_min_keys = p.split_min_keys,
                  .max_ranges = defer_merge_max_ranges,
                  .groups = p.defer_merge_groups};
  }
  kernels::launch_paged_attention(p, stream_, *policy_);
  gemv_follows_attention_ = true;
  return partials;
}

void CudaBackend::attention(Tensor q, int num_q_heads, int num_kv_heads, float scale, KvCacheLayer cache,
                            const AttentionMeta& meta, Tensor out) {
  const char* op = "attention";
  kernels::PagedAttentionParams p = attention_params(num_q_heads, num_kv_heads, scale, cache, meta, out, op);
  expect(q, DType::kBF16, op, "q");
  TPS_CHECK(q.dim(-1) == int64_t(num_q_heads) * p.head_dim && out.numel() == q.numel(), op, ": q ",
            q.shape_string(), " out ", out.shape_string());
  if (meta.num_seqs == 0 || meta.max_query_len == 0) return;
  p.q = bf16_ptr(q);
  launch_attention(p, meta, to_int(q.numel() / (int64_t(num_q_heads) * p.head_dim), "tokens"));
}

// One launch (the prologue folded into the tensor-core kernel) for decode steps: one token a sequence and a
// sequence a token (the kernel appends k and v only for tokens inside a sequence; the padding rows of a
// captured batch are sequences of their own). Otherwise, or with the option off: the two ops.
void CudaBackend::qk_norm_rope_attention(Tensor qkv, int num_q_heads, int num_kv_heads, Tensor q_norm_w,
                                         Tensor k_norm_w, float eps, const RopeConfig& rope, float scale,
                                         const AttentionMeta& meta, KvCacheLayer cache, Tensor q,
                                         Tensor out) {
  qk_norm_rope_attention_deferring(qkv, num_q_heads, num_kv_heads, q_norm_w, k_norm_w, eps, rope, scale, meta,
                                   cache, q, out, 0);
}

kernels::AttentionPartials CudaBackend::qk_norm_rope_attention_deferring(
    Tensor qkv, int num_q_heads, int num_kv_heads, Tensor q_norm_w, Tensor k_norm_w, float eps,
    const RopeConfig& rope, float scale, const AttentionMeta& meta, KvCacheLayer cache, Tensor q, Tensor out,
    int defer_merge_max_ranges) {
  const char* op = "qk_norm_rope_attention";
  const int64_t tokens = qkv.ndim == 2 ? qkv.dim(0) : -1;
  const bool fused = options_.kernels.attention_fused_prologue && options_.kernels.attention_tensor_cores &&
                     meta.max_query_len == 1 && meta.num_seqs > 0 && meta.num_seqs == tokens;
  if (!fused) {
    Backend::qk_norm_rope_attention(qkv, num_q_heads, num_kv_heads, q_norm_w, k_norm_w, eps, rope, scale,
                                    meta, cache, q, out);
    return {};
  }
  expect_qk_norm(qkv, num_q_heads, num_kv_heads, q_norm_w, k_norm_w, rope, meta, cache, op);
  kernels::PagedAttentionParams p = attention_params(num_q_heads, num_kv_heads, scale, cache, meta, out, op);
  TPS_CHECK(out.numel() == tokens * num_q_heads * p.head_dim, op, ": out ", out.shape_string(), " for ",
            tokens, " tokens");
  cuda_ops::expect_aligned16(qkv, op, "qkv");  // the kernel reads q rows in 16-byte vectors
  cuda_ops::expect_aligned16(out, op, "out");
  kernels::PagedAttentionParams::Prologue& pro = p.prologue;
  pro.qkv = bf16_ptr(qkv);
  pro.q_norm_weight = bf16_ptr(q_norm_w);
  pro.k_norm_weight = bf16_ptr(k_norm_w);
  pro.slot_mapping = meta.slot_mapping.ptr<int32_t>();
  pro.k_cache = bf16_mut(cache.k);
  pro.v_cache = bf16_mut(cache.v);
  pro.eps = eps;
  kernels::set_rope_inv_freq(pro.inv_freq, rope.head_dim, rope.theta);
  return launch_attention(p, meta, static_cast<int>(tokens), defer_merge_max_ranges);
}

// A one-sequence decode step on the folded tensor-core kernel (qk_norm_rope_attention_deferring) whose O
// projection is the staged GEMV with its activations in shared memory: attention leaves a context of
// 2..runtime.attention_merge_in_o_max_ranges ranges unmerged and the projection merges them
// (kernels/attention_partials.h). The partials stay in the scratch region between the two launches (nothing
// else runs in between). Otherwise the two ops.
void CudaBackend::qk_norm_rope_attention_linear(Tensor qkv, int num_q_heads, int num_kv_heads,
                                                Tensor q_norm_w, Tensor k_norm_w, float eps,
                                                const RopeConfig& rope, float scale,
                                                const AttentionMeta& meta, KvCacheLayer cache, Tensor q,
                                                Tensor attn, Tensor o_proj_w, Tensor out) {
  const int max_ranges =
      std::min(options_.kernels.attention_merge_in_o_max_ranges, kernels::kAttentionPartialsMaxRanges);
  const bool defer = max_ranges >= 2 && meta.num_seqs == 1 && linear_after_attention_merges(attn, o_proj_w);
  const kernels::AttentionPartials partials =
      qk_norm_rope_attention_deferring(qkv, num_q_heads, num_kv_heads, q_norm_w, k_norm_w, eps, rope, scale,
                                       meta, cache, q, attn, defer ? max_ranges : 0);
  linear_from(attn, o_proj_w, out, partials.out != nullptr ? &partials : nullptr);
}

}  // namespace tpserve
