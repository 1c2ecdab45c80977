// Backend: the set of ops the Qwen3-MoE forward needs, on Tensor views. `cpu` is the float32 reference
// (the oracle for every CUDA kernel); `cuda` is the fast one. Shapes: T = tokens in the step, S = sequences,
// H = hidden, V = vocabulary rows held by this rank, E = experts held by this rank, k = experts per token.
// Ops are asynchronous on device backends (ordered on the backend's stream); copy_to_host waits.
#pragma once

#include <compare>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/synthetic_value.h"
#include "runtime/backend/tensor.h"

namespace tpserve {

// One layer's paged KV cache: [num_blocks, block_size, kv_heads, head_dim] each.
struct KvCacheLayer {
  Tensor k;
  Tensor v;
};

// Where each token of the step sits; all i32 tensors in backend memory.
struct AttentionMeta {
  Tensor positions;     // [T]
  Tensor slot_mapping;  // [T]   block * block_size + offset in the cache
  Tensor query_start;   // [S+1] first token of each sequence in the step
  Tensor context_lens;  // [S]   tokens in the cache for the sequence after this step
  Tensor block_tables;  // [S, max_blocks_per_seq]
  int num_seqs = 0;
  int max_query_len = 0;  // host copies for launch sizing
  int max_context_len = 0;
};

// Per-row sampling parameters, in backend memory.
struct SamplingInputs {
  Tensor temperature;  // [S] f32, 0 = greedy
  Tensor top_k;        // [S] i32, 0 = off
  Tensor top_p;        // [S] f32, 1 = off
  Tensor min_p;        // [S] f32, 0 = off
  Tensor seed;         // [S] i64
  Tensor counter;      // [S] i64 (token index of the sequence; with the seed it picks the random draw)
};

struct RopeConfig {
  double theta = 10000.0;
  int head_dim = 0;
};

// One kernel node's launch as the neighbours table shows it.
struct KernelLaunchShape {
  std::string kernel;  // short name (common/kernel_name.h)
  int blocks = 0;      // the grid's blocks
  int threads = 0;     // a block's
  int regs = 0;        // a thread's
  size_t smem = 0;     // a block's, static + dynamic
  auto operator<=>(const KernelLaunchShape&) const = default;
};

// A kind of kernel -> kernel edge in a step graph: the same two launches, `count` times. The first kernel's
// grid spread evenly over the SMs, one wave at most: `sms_with_most` SMs hold `first_most` of its blocks, the
// others `first_fewest` (one less, or the same where it divides evenly or fills every SM). `beside_*`: blocks
// of the second an SM holds beside that many of the first's (kernels/residency.h), `bound_*` what stops one
// more. Under PDL the second kernel's blocks start early, and issue what precedes their wait, only there.
// Arithmetic on the launches: the block scheduler's placement is not documented, and thread-block clusters
// are not modelled.
struct KernelNeighbours {
  KernelLaunchShape first, second;
  int count = 0;
  int sms = 0;  // the device's
  int first_most = 0, first_fewest = 0, sms_with_most = 0;
  int beside_most = 0, beside_fewest = 0;
  std::string bound_most, bound_fewest;
};

// What a captured step graph contains (CUDA graphs): nodes, kernel nodes, edges, programmatic (PDL) edges,
// per launch site the kernel nodes and the programmatic edges into them, and the kernel -> kernel edges'
// neighbours table.
struct GraphReport {
  int nodes = 0;
  int kernel_nodes = 0;
  int edges = 0;
  int programmatic_edges = 0;
  // Kernel nodes launched with PDL whose predecessor is a kernel node: each should carry one programmatic
  // edge.
  int pdl_kernel_nodes_after_kernel = 0;
  std::map<std::string, int> kernels_per_site;
  std::map<std::string, int> programmatic_edges_per_site;
  std::vector<KernelNeighbours> neighbours;  // most frequent first
  double capture_ms = 0.0;
  size_t memory_bytes = 0;  // device memory the instantiated graph took
  std::string format() const;
};

// A captured region replayed as one unit (one CUDA graph launch).
class StepGraph {
 public:
  virtual ~StepGraph() = default;
  virtual void replay() = 0;
  virtual const GraphReport& report() const = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual Device device() const = 0;
  virtual DType weight_dtype() const = 0;      // what weights are stored as
  virtual DType activation_dtype() const = 0;  // hidden states between ops

  // Memory: allocations live as long as the backend (weights, KV cache, workspace); none happen per step.
  virtual Tensor alloc(DType dtype, std::initializer_list<int64_t> shape) = 0;
  virtual void copy_from_host(Tensor dst, const void* src) = 0;  // dst.nbytes() bytes
  virtual void copy_to_host(void* dst, Tensor src) = 0;          // waits for the data
  virtual void zero(Tensor t) = 0;
  virtual void synchronize() = 0;
  virtual size_t allocated_bytes() const = 0;
  // Bytes alloc() can still hand out, where the backend has a fixed budget (the CUDA arena); nullopt where
  // it has none (host memory). The KV cache is sized from it.
  virtual std::optional<size_t> memory_left() const { return std::nullopt; }
  // Generates a slice of a synthetic weight into `dst` (weight dtype, slice.numel() elements) where the
  // backend can do it faster than the host (a GPU); false: the caller reads the slice on the host instead.
  virtual bool fill_synthetic(Tensor dst, const SyntheticSlice& slice) {
    (void)dst, (void)slice;
    return false;
  }

  // Captures the ops `body` issues into a replayable graph; nullptr where the backend has no graphs (the
  // caller then runs `body` eagerly every step). Nothing in `body` may synchronise or copy to the host.
  virtual std::unique_ptr<StepGraph> capture(const std::function<void()>& body) {
    (void)body;
    return nullptr;
  }
  // The launch-policy decisions (PDL per site) this backend took, for --report-pdl.
  virtual std::string launch_report() const { return name() + " backend: no kernel launches to report"; }

  // out[t, :] = table[ids[t] - vocab_begin, :] when ids[t] is in [vocab_begin, vocab_begin + V), else 0.
  virtual void embedding(Tensor ids /*[T] i32*/, Tensor table /*[V, H]*/, int64_t vocab_begin,
                         Tensor out /*[T, H]*/) = 0;
  // out = w * x / sqrt(mean(x^2) + eps), per row.
  virtual void rmsnorm(Tensor x /*[T, H]*/, Tensor w /*[H]*/, float eps, Tensor out /*[T, H]*/) = 0;
  // residual += x; out = rmsnorm(residual).
  virtual void add_rmsnorm(Tensor residual /*[T, H]*/, Tensor x /*[T, H]*/, Tensor w, float eps,
                           Tensor out) = 0;
  // inout += x
  virtual void add(Tensor inout /*[T, H]*/, Tensor x /*[T, H]*/) = 0;
  // out[T, N] = x[T, K] * w[N, K]^T (weights in [out, in] layout as in checkpoints).
  virtual void linear(Tensor x, Tensor w, Tensor out) = 0;
  // From qkv [T, (Hq + 2 Hkv) * D]: per-head RMSNorm of q and k (weights [D]), RoPE (neox half split) at
  // positions, k and v written to the cache at slot_mapping; q [T, Hq * D] out.
  virtual void qk_norm_rope_kv(Tensor qkv, int num_q_heads, int num_kv_heads, Tensor q_norm_w,
                               Tensor k_norm_w, float eps, const RopeConfig& rope, const AttentionMeta& meta,
                               KvCacheLayer cache, Tensor q_out) = 0;
  // Causal attention of each token over its sequence's cached keys up to its own position (GQA).
  virtual void attention(Tensor q /*[T, Hq * D]*/, int num_q_heads, int num_kv_heads, float scale,
                         KvCacheLayer cache, const AttentionMeta& meta, Tensor out /*[T, Hq * D]*/) = 0;
  // qk_norm_rope_kv into q, then attention into out. A backend may run the two as one launch where it can
  // (CUDA: decode steps, PagedAttentionParams::prologue); q is scratch then, left unwritten.
  virtual void qk_norm_rope_attention(Tensor qkv, int num_q_heads, int num_kv_heads, Tensor q_norm_w,
                                      Tensor k_norm_w, float eps, const RopeConfig& rope, float scale,
                                      const AttentionMeta& meta, KvCacheLayer cache, Tensor q, Tensor out) {
    qk_norm_rope_kv(qkv, num_q_heads, num_kv_heads, q_norm_w, k_norm_w, eps, rope, meta, cache, q);
    attention(q, num_q_heads, num_kv_heads, scale, cache, meta, out);
  }
  // qk_norm_rope_attention into attn, then linear(attn, o_proj_w, out): the attention block up to its output
  // projection. A backend may hand the projection the attention's unmerged context ranges instead of
  // merged rows (CUDA: one-token decode steps, runtime.attention_merge_in_o_max_ranges): attn is scratch
  // then, maybe left unwritten.
  virtual void qk_norm_rope_attention_linear(Tensor qkv, int num_q_heads, int num_kv_heads, Tensor q_norm_w,
                                             Tensor k_norm_w, float eps, const RopeConfig& rope, float scale,
                                             const AttentionMeta& meta, KvCacheLayer cache, Tensor q,
                                             Tensor attn, Tensor o_proj_w, Tensor out) {
    qk_norm_rope_attention(qkv, num_q_heads, num_kv_heads, q_norm_w, k_norm_w, eps, rope, scale, meta, cache,
                           q, attn);
    linear(attn, o_proj_w, out);
  }
  // Softmax over logits in f32, top-k (the k largest logits, ties to the smaller index, NaN as -inf),
  // renormalised when asked.
  virtual void topk_gating(Tensor router_logits /*[T, E_all] f32*/, int k, bool renormalize,
                           Tensor weights /*[T, k] f32*/, Tensor ids /*[T, k] i32*/) = 0;
  // The residual add + RMSNorm before an MoE block and its router: add_rmsnorm(residual, x, norm_w, eps,
  // normed); logits = normed * router_w^T (linear); topk_gating(logits, k, renormalize, weights, ids). A
  // backend may run the three as one launch (CUDA: kernels/router_fused.h); logits is scratch.
  virtual void add_rmsnorm_route(Tensor residual /*[T, H]*/, Tensor x /*[T, H]*/, Tensor norm_w /*[H]*/,
                                 float eps, Tensor normed /*[T, H]*/, Tensor router_w /*[E_all, H]*/,
                                 Tensor logits /*[T, E_all] f32*/, int k, bool renormalize,
                                 Tensor weights /*[T, k] f32*/, Tensor ids /*[T, k] i32*/) {
    add_rmsnorm(residual, x, norm_w, eps, normed);
    linear(normed, router_w, logits);
    topk_gating(logits, k, renormalize, weights, ids);
  }
  // out[t] = sum over the token's experts e in [expert_begin, expert_begin + E) of
  //          weight * down_e(silu(gate_e(x)) * up_e(x)); experts held elsewhere contribute nothing.
  virtual void moe_experts(Tensor x /*[T, H]*/, Tensor gate_up /*[E, 2I, H]*/, Tensor down /*[E, H, I]*/,
                           Tensor topk_ids /*[T, k]*/, Tensor topk_weights /*[T, k]*/, int expert_begin,
                           Tensor out /*[T, H]*/) = 0;
  // moe_experts into out, then add_rmsnorm(residual, out, norm_w, eps, normed): a backend may fuse the MoE's
  // combine with the norm, leaving out unwritten (it is scratch then). normed may be x.
  virtual void moe_experts_add_rmsnorm(Tensor x, Tensor gate_up, Tensor down, Tensor topk_ids,
                                       Tensor topk_weights, int expert_begin, Tensor out, Tensor residual,
                                       Tensor norm_w, float eps, Tensor normed) {
    moe_experts(x, gate_up, down, topk_ids, topk_weights, expert_begin, out);
    add_rmsnorm(residual, out, norm_w, eps, normed);
  }
  // Expert-parallel all-to-all dispatch, in three ops around two fixed-capacity exchanges. Each of P ranks
  // owns E_r consecutive experts; a rank's tokens go to the owners of their experts in rows of a
  // [P, cap, H] send buffer (cap = tokens * k: the worst case, so nothing is ever dropped).
  // pack: send_x[p, n] = x[t] for the n-th (token t, slot j) routed to rank p; send_expert[p, n] = the
  // owner's local expert id (-1 for unused rows); origin[t, j] = p * cap + n.
  virtual void moe_pack(Tensor x /*[Tc, H]*/, Tensor topk_ids /*[Tc, k]*/, int experts_per_rank,
                        Tensor send_x /*[P, cap, H]*/, Tensor send_expert /*[P, cap] i32*/,
                        Tensor origin /*[Tc, k] i32*/) = 0;
  // out[n] = expert_{ids[n]}(rows[n]) for rows with ids[n] >= 0 (unweighted); others are left untouched.
  virtual void moe_experts_rows(Tensor rows /*[N, H]*/, Tensor expert_ids /*[N] i32*/, Tensor gate_up,
                                Tensor down, Tensor out /*[N, H]*/) = 0;
  // out[t] = sum_j weights[t, j] * results[origin[t, j]]
  virtual void moe_combine(Tensor results /*[P * cap, H]*/, Tensor origin /*[Tc, k]*/, Tensor topk_weights,
                           Tensor out /*[Tc, H]*/) = 0;
  // out[T, I] = silu(gate_up[:, :I]) * gate_up[:, I:]
  virtual void silu_mul(Tensor gate_up /*[T, 2I]*/, Tensor out /*[T, I]*/) = 0;
  // out[r] = x[rows[r]]
  virtual void gather_rows(Tensor x /*[T, N]*/, Tensor rows /*[R] i32*/, Tensor out /*[R, N]*/) = 0;

  // Sampling, split so that tensor parallelism never gathers whole logits. Per row: the C largest logits of
  // this rank's vocabulary slice (descending, ties to the smaller id; ids are global), and [max, sum of
  // exp((logit - max) / T)] over the slice (T = temperature, 1 when greedy). Greedy rows (T <= 0) are
  // sampled from their best candidate alone, so they get only that: the best in every one of the C places
  // (no top-C selection, the costliest part of a greedy decode step's sampling).
  virtual void sampling_candidates(Tensor logits /*[S, V] f32*/, int64_t vocab_begin,
                                   Tensor temperature /*[S]*/, Tensor values /*[S, C] f32*/,
                                   Tensor ids /*[S, C] i32*/, Tensor stats /*[S, 2] f32*/) = 0;
  // In place, before sampling: for each entry whose token lies in this rank's slice [vocab_begin,
  // vocab_begin + V), x = logits[row, token - vocab_begin] + bias; x = x > 0 ? x / scale : x * scale;
  // the logit becomes x - subtract (StepBatch's LogitAdjustment). Entries name distinct (row, token) pairs.
  virtual void adjust_logits(Tensor logits /*[R, V] f32*/, int64_t vocab_begin,
                             Tensor targets /*[E, 2] i32: row, token*/,
                             Tensor values /*[E, 3] f32: bias, scale, subtract*/) = 0;
  // In place, before sampling (after adjust_logits): for each mask m, the logit of every token
  // vocab_begin + v of this rank's slice becomes -inf in row rows[m] unless bit t % 32 of masks[m, t / 32]
  // is set (t = vocab_begin + v; StepBatch::token_masks).
  virtual void mask_logits(Tensor logits /*[R, V] f32*/, int64_t vocab_begin, Tensor rows /*[M] i32*/,
                           Tensor masks /*[M, W] i32*/) = 0;
  // Merges the candidates of R ranks and draws one token per row: greedy = largest logit; otherwise
  // temperature, then top-k, min-p (p >= min_p * p_max) and top-p (the smallest prefix whose mass reaches
  // top_p, of the distribution left by top-k and min-p, renormalised; of the full softmax when neither is
  // set), all within the C best; then a Gumbel-max draw seeded by (seed, counter, token id), so that every
  // layout draws the same token.
  virtual void sample(Tensor values /*[R, S, C]*/, Tensor ids /*[R, S, C]*/, Tensor stats /*[R, S, 2]*/,
                      const SamplingInputs& params, Tensor tokens /*[S] i32*/) = 0;

  // Speculative decoding. Per group g (sampled rows [group_start[g], group_start[g + 1]) of the candidate
  // arrays, one sequence), every row draws its token as sample() would, and drafts are accepted left to
  // right -- the draft for the position after row r is row_tokens[r + 1] -- while row r's draw equals it:
  // rejection sampling against greedy drafts (acceptance p(draft); a rejection emits the draw, p without the
  // draft), with the emitted tokens exactly the plain draws. The group's last row draws the bonus token.
  // emitted[r] is the token emitted at row r (-1 past a rejection); accepted[g] the drafts taken.
  virtual void verify_and_sample(Tensor values /*[P, R, C]*/, Tensor ids /*[P, R, C]*/,
                                 Tensor stats /*[P, R, 2]*/, const SamplingInputs& params,
                                 Tensor row_tokens /*[R] i32*/, Tensor group_start /*[G + 1] i32*/,
                                 Tensor emitted /*[R] i32*/, Tensor accepted /*[G] i32*/) = 0;
  // In place: ids[i] < 0 becomes table[-ids[i] - 1] (tokens that stay on the device: drafts, emitted).
  virtual void resolve_tokens(Tensor ids /*[N] i32*/, Tensor table /*[M] i32*/) = 0;
  // out[g] = a[g] + b[g] + c
  virtual void add_i32(Tensor a /*[G] i32*/, Tensor b /*[G] i32*/, int32_t c, Tensor out /*[G] i32*/) = 0;
  // table[index[g]] = values[g]
  virtual void scatter_i32(Tensor values /*[G] i32*/, Tensor index /*[G] i32*/, Tensor table /*[M] i32*/) = 0;
  // Metadata of a one-token-per-sequence draft step: slot of `positions` from each sequence's block table,
  // context length position + 1.
  virtual void draft_step_meta(Tensor positions /*[G] i32*/, Tensor block_tables /*[G, W] i32*/,
                               int block_size, Tensor slot_mapping /*[G] i32*/,
                               Tensor context_lens /*[G] i32*/) = 0;
};

std::unique_ptr<Backend> make_cpu_backend();

}  // namespace tpserve
