// Attention over the paged KV cache (GQA), for decode and prefill: each query token attends to cache
// positions 0 .. its own position in its sequence (the CPU reference's semantics).
//
// One block serves one KV head of one sequence for a tile of query rows (the group of query heads sharing
// that KV head, times a few tokens in prefill), so each KV head's cache is read once per tile for its whole
// group. Decode, and short queries such as a speculative step's 1 + k rows (at most
// kAttentionMaxSplitQueryLen tokens a sequence), split the context into ranges (split-K): blocks write
// unnormalised partial results, and the last block of a tile to finish merges them (it learns it is last from
// an arrival counter per tile, which it resets to 0: counters are zeroed once and stay zero between
// launches); more than merge_one_level_max (default 16) ranges merge in two levels (the last block of each
// group of ranges merges the group, the last of those the groups); with one non-empty range the result is
// written directly. Longer queries (prefill) take one block per tile of query rows over the whole context.
#pragma once

#include <cmath>

#include "kernels/attention_partials.h"
#include "kernels/kernel_api.h"
#include "kernels/qk_norm_rope_kv.h"

namespace tpserve::kernels {

inline constexpr int kAttentionMaxGroup = 16;  // query heads per KV head
// Longest query (tokens of one sequence in the step) that takes the split decode path: decode (1) and
// speculative verification (1 + k, k <= 4). Prefill chunks that short take it too, under the
// decode_attention PDL site.
inline constexpr int kAttentionMaxSplitQueryLen = 8;

// Most context ranges a (token tile, sequence, KV head) is cut into (its groups in the two-level merge:
// kAttentionMergeGroup, kernels/attention_partials.h).
inline constexpr int kAttentionMaxSplits = 128;
inline constexpr int kAttentionMaxMergeGroups = kAttentionMaxSplits / kAttentionMergeGroup;

struct PagedAttentionParams {
  const bf16* q = nullptr;                // [T, Hq * D]
  const bf16* k_cache = nullptr;          // [num_blocks, block_size, Hkv, D]
  const bf16* v_cache = nullptr;          // [num_blocks, block_size, Hkv, D]
  const int32_t* positions = nullptr;     // [T]
  const int32_t* query_start = nullptr;   // [S + 1]
  const int32_t* block_tables = nullptr;  // [S, max_blocks_per_seq]
  bf16* out = nullptr;                    // [T, Hq * D] (rows of tokens outside every sequence: untouched)
  float* partial_out = nullptr;           // [T, Hq, num_splits, D] unnormalised sums (num_splits > 1)
  float* partial_max_sum = nullptr;       // [T, Hq, num_splits, 2] max (log2 units) and sum of exp2
  // Arrivals, 0 between launches (persistent memory, not step scratch): [capacity] a tile's ranges (tile =
  // (token tile x S + seq) x Hkv + KV head), then [capacity, kAttentionMaxMergeGroups] its merge groups'.
  int32_t* split_counters = nullptr;
  int split_counter_capacity = 0;  // tiles the counters cover (attention_split_counter_capacity)
  int num_seqs = 0;                // S
  int num_q_heads = 0;             // Hq
  int num_kv_heads = 0;            // Hkv; Hq / Hkv <= kAttentionMaxGroup
  int head_dim = 0;                // D: 32, 64 or 128
  int block_size = 0;              // tokens per cache block
  int max_blocks_per_seq = 0;
  int max_query_len = 0;  // longest query of the step (1 = decode)
  int num_splits = 1;     // most context ranges per (token, KV head); > 1 only for short queries
  // Keys of a context range: a multiple of this (>= kAttentionKeysPerSplitQuantum, a multiple of it), so a
  // short context runs as fewer, longer ranges (fewer partials to merge) when it is larger.
  int split_keys = 32;
  // Ranges of at least sqrt(split_growth * context) keys (attention_keys_per_split); 0: no such floor.
  int split_growth = 0;
  // Ranges of at least this many keys (then a multiple of split_keys); 0: split_keys.
  int split_min_keys = 0;
  // A tile whose context has 2..this many ranges is left unmerged: its blocks store their partials and
  // count no arrival, and the launch after this one merges them (AttentionPartials; kernels/
  // attention_partials.h). 0: every tile merged here. One-token decode steps only (the caller's duty).
  int defer_merge_max_ranges = 0;
  // With defer_merge_max_ranges: a tile of more ranges than that merges them by groups of
  // kAttentionMergeGroup (each group's last block) and leaves the groups' partials to the next launch
  // where it has 2..defer_merge_max_ranges groups (attention_deferred_partials), instead of its last block
  // merging the groups (or, at up to merge_one_level_max ranges, all the ranges).
  bool defer_merge_groups = false;
  // A tile of up to this many ranges is merged by its last block alone; more in two levels (groups of
  // kAttentionMergeGroup ranges, then the groups). At least kAttentionMergeGroup.
  int merge_one_level_max = 2 * kAttentionMergeGroup;
  // A block's arrival at its tile's counter (the merge) as one acquire-release atomic by thread 0, instead
  // of a sequentially consistent fence (__threadfence) before a relaxed atomic and another after it.
  bool arrival_acq_rel = false;
  // Block order of the split decode kernels (attention_block_place): false, a tile's ranges are consecutive
  // blocks (blockIdx.x = token tile x S + range); true, ranges outermost (range r of every tile, then r + 1;
  // prefill keeps its order), so that the first ranges, which every
  // context has, are dispatched first. A step planned for a long context has many more blocks than a short
  // one uses (the others exit after their PDL wait); under PDL only the blocks that find room beside the QKV
  // projection's start before it ends (e.g. 76 of 172 at one token and max_seq_len 8192: 43 ranges of 4 KV
  // heads), and with tiles in a row the later KV heads' working blocks are not among them. The same results.
  bool ranges_outermost = false;
  float scale = 1.0f;  // softmax scale (head_dim^-0.5)
  // The split decode path on tensor cores (kernels/paged_attention_mma.cu) instead of CUDA cores.
  bool tensor_cores = false;
  // Tensor-core kernel: the step inputs (query_start, positions; the prologue's slots, norm weights and
  // rotation) are read before the PDL wait, so none may be written by the launch right before this one
  // (kernels/pdl.cuh); false: after it (for A/B; the same results).
  bool inputs_before_wait = false;
  // With the prologue folded in and inputs_before_wait: the first K/V tile of the block's range is copied
  // before the PDL wait too (the launch before this one writes no cache row; the token's own key is this
  // kernel's to append and patch). false: after it (for A/B; the same results).
  bool kv_before_wait = false;
  // Tensor-core kernel: each block lets the next launch start (PDL trigger) once its key tiles are done
  // instead of right after its wait, so that the next kernel's weight copies (the O projection's) do not
  // stream while the block's tiles are computed (for A/B: under PDL the same results).
  bool trigger_after_keys = false;
  // Tensor-core kernel, steps of one token a sequence with groups of up to 8 query heads a KV head, head_dim
  // 128: the tiles' products transposed, a warp's 16 keys as the mma rows and the group's heads as its
  // columns (kernels/paged_attention_key_rows.cuh), so that no accumulator row is empty. Results within
  // rounding of the row tiles' (the tensor cores sum in another order).
  bool key_rows = false;
  // With key_rows: the block's warps split each tile's output dims (D / 4 each) instead of its keys. Each
  // warp computes its 16 keys' scores of a tile, and the block shares the heads' max over the tile and the
  // probabilities through shared memory (two block barriers a tile), so that the block's end needs no merge
  // of its warps' outputs (kernels/paged_attention_key_rows.cuh). Results within rounding of the row tiles'.
  bool dim_split = false;
  // Folded prologue: the position-free loads (norm weights, inverse frequencies) go out first, and the first
  // token's slot beside the positions, so that a block reaches its first K/V copies two trips to memory after
  // its start rather than four (for A/B: the same results).
  bool prologue_loads_first = false;
  // Decode (one token a sequence) on tensor cores only: the attention prologue (kernels/qk_norm_rope_kv.h)
  // folded into the kernel, one launch instead of two. Each block reads its rows of q from qkv and normalises
  // and rotates them itself (q above is then unused); the block whose context range holds the token's own
  // key (the last) normalises and rotates its KV head's k; where the token's slot is >= 0 it appends k and v
  // to the cache there and uses them for that key, and where it is < 0 it appends nothing and the key is what
  // the cache holds (as with the two ops). This assumes, as the scheduler, graph padding and draft_step_meta
  // guarantee, that a token's slot is its position's entry in its sequence's block table. qkv == nullptr: q
  // is read from q.
  struct Prologue {
    const bf16* qkv = nullptr;              // [T, (Hq + 2 Hkv) * D]
    const bf16* q_norm_weight = nullptr;    // [D]
    const bf16* k_norm_weight = nullptr;    // [D]
    const int32_t* slot_mapping = nullptr;  // [T]
    bf16* k_cache = nullptr;                // k_cache above, written
    bf16* v_cache = nullptr;                // v_cache above, written
    float eps = 1e-6f;
    float inv_freq[kRopeMaxHeadDim / 2] = {};  // set_rope_inv_freq
  } prologue;
};

// Keys per context range (PagedAttentionParams::split_keys) are a multiple of the tensor-core kernel's 16
// keys a warp (it masks the keys of its 64-key tiles past a range), and on CUDA cores a multiple of that
// kernel's 32-key tile.
inline constexpr int kAttentionKeysPerSplitQuantum = 16;
inline constexpr int kAttentionCudaCoreSplitKeys = 32;

// A decode block's place in the grid (token tiles x num_splits, sequences, KV heads): its token tile,
// sequence, KV head and context range, from its block index. Tile by tile (blockIdx.x = tile x num_splits +
// range), or with the ranges outermost in the grid's linear order, x fastest (PagedAttentionParams::
// ranges_outermost: range r of every tile, sequence and KV head, KV head fastest, before range r + 1).
struct AttentionBlockPlace {
  int tile = 0, seq = 0, kv_head = 0, split = 0;
};
__host__ __device__ inline AttentionBlockPlace attention_block_place(int bx, int by, int bz, int gx, int gy,
                                                                     int gz, int num_splits,
                                                                     bool ranges_outermost) {
  AttentionBlockPlace at;
  if (!ranges_outermost) {
    at.seq = by, at.kv_head = bz, at.tile = bx / num_splits, at.split = bx % num_splits;
    return at;
  }
  const int per_range = gx / num_splits * gy * gz;
  int i = bx + gx * (by + gy * bz);
  at.split = i / per_range, i %= per_range;
  at.kv_head = i % gz, i /= gz;
  at.seq = i % gy, at.tile = i / gy;
  return at;
}

// The split for decode: up to one wave of blocks, `blocks_per_sm` on each of `num_sms` SMs
// (attention_decode_blocks_per_sm), at `max_context_len` (ranges of at least p.split_keys keys, and the
// square-root floor of p.split_growth), within `max_partial_bytes` of partial buffers. Fills num_splits;
// splits only steps of at most attention_split_counter_capacity(num_sms) tiles (token tiles x S x Hkv).
void plan_decode_splits(PagedAttentionParams& p, int max_context_len, int num_tokens, int num_sms,
                        size_t max_partial_bytes, int blocks_per_sm);
// Blocks of the split decode kernel (tensor cores or CUDA cores) at head_dim that one SM of the current
// device holds at once (registers and shared memory; kernels/residency.h resident_blocks).
int attention_decode_blocks_per_sm(bool tensor_cores, int head_dim);
int paged_attention_mma_blocks_per_sm(int head_dim);
size_t attention_partial_bytes(int num_tokens, int num_q_heads, int head_dim, int num_splits);
// Tiles whose split counters a backend holds for every step plan_decode_splits makes with `num_sms`
// (PagedAttentionParams::split_counter_capacity), and the counters it allocates once (zeroed) for them: one
// a tile, then kAttentionMaxMergeGroups a tile for the merge groups.
int attention_split_counter_capacity(int num_sms);
int attention_split_counter_entries(int num_sms);

void launch_paged_attention(const PagedAttentionParams& p, cudaStream_t stream, const LaunchPolicy& policy);
// The tensor-core kernel of the split decode path (launch_paged_attention takes it where p.tensor_cores and
// the query is short); its checks are launch_paged_attention's.
void launch_paged_attention_mma(const PagedAttentionParams& p, cudaStream_t stream,
                                const LaunchPolicy& policy);

}  // namespace tpserve::kernels
