// The CUDA backend's kernel switches: which kernel form each op takes and when each kernel issues its loads.
// Plain data without CUDA, so that the config (runtime.* keys of the same names, docs/config.md) holds them
// as they are and hands them to the backend whole (CudaBackendOptions::kernels). Every switch's default is
// the measured faster setting (docs/PERF.md); the others are kept for A/B runs. A new switch is a field here
// and a line in for_each_kernel_switch (the config reads and writes it from there) and a row in
// docs/config.md.
#pragma once

namespace tpserve {

struct CudaKernelSwitches {
  // Small-M products whose weights fit in the SMs' shared memory take the staged GEMV (kernels/gemv.h), and
  // every kernel prefers the largest shared-memory carveout (kernels/launch.h).
  bool staged_gemv = true;
  // The cp.async groups a staged GEMV warp cuts its weight pieces into (1-4; the product of each group
  // starts once it has landed). GemvLaunchOptions::staged_copy_groups.
  int staged_gemv_copy_groups = 1;
  // Where a staged GEMV's activations do not fit in shared memory beside its weight rows (QKV and O of
  // Qwen3-30B-A3B from 6 and 11 rows), it reads them from global memory instead of leaving the shape to the
  // register GEMV (GemvLaunchOptions::staged_x_global).
  bool staged_gemv_x_global = true;
  // Staged GEMV blocks an SM may hold in one wave (1-4; GemvLaunchOptions::staged_blocks_per_sm): smaller
  // blocks can start their weight copies while the kernel before them still holds part of the SM.
  // 3 against 1: -1.0% on the step at c = 4, within the noise at c = 1 and 16 (docs/PERF.md, twenty-second
  // session).
  int staged_gemv_blocks_per_sm = 3;
  // Warps a staged GEMV block may have (4-32; GemvLaunchOptions::staged_max_warps): fewer let the O
  // projection's blocks become resident beside the decode attention blocks before them. 16 against 32: -1.1%
  // on the step at c = 1 (twice), -0.2% and -0.6% at c = 4, none at 16; 8 and 12 slower at c = 16
  // (docs/PERF.md, twenty-second session).
  int staged_gemv_max_warps = 16;
  // Copy groups (staged_gemv_copy_groups) a staged GEMV warp keeps in flight before its wait (0: all;
  // GemvLaunchOptions::staged_groups_in_flight). Every staged GEMV throttled, 4 groups: H100 -0.12% on the
  // step at c = 1, +1.64% at c = 4; 2 groups -0.27% and -0.09% (docs/PERF.md, thirty-second session): 0.
  int staged_gemv_groups_in_flight = 0;
  // The staged GEMV launched right after an attention launch (the O projection), where it has at most
  // attention_next_gemv_max_rows rows, cuts its weight copies into this many groups (2-4) and keeps one in
  // flight before its PDL wait, whatever staged_gemv_copy_groups and staged_gemv_groups_in_flight say; 0 or
  // 1: as the other staged GEMVs. At the default 1 row that is a decode step at c = 1.
  // Phase marks showed decode attention 4x slower in its key tiles while the O projection's 16.8 MB were
  // queued; throttled, attention ends 2.0 us sooner and O 0.8 us later. H100, against 0: -1.48% on the step
  // at c = 1, +1.38% at c = 4, -0.06% at c = 16 (2 groups: -0.45%, -0.01%, -0.11%; docs/PERF.md,
  // thirty-second session). Every staged GEMV throttled (staged_gemv_groups_in_flight) helped attention as
  // much but cost the QKV projection more.
  int attention_next_gemv_copy_groups = 4;
  int attention_next_gemv_max_rows = 1;
  // The staged GEMV launched directly after an RMSNorm launch (the QKV projection; also the unfused router, a
  // dense MLP's gate_up and MTP's first fc), where it has at most this many rows (0: none), triggers the next
  // launch (PDL) right after issuing its weight copies, before its own wait
  // (GemvLaunchOptions::staged_trigger_before_wait): decode attention's blocks then become resident and run
  // their pre-wait work (step inputs, rotation, first K/V tile) during the norm instead of only once the QKV
  // projection has passed its wait. The same results: what a GEMV's dependents read before their waits is
  // never the norm's output (kernels/pdl.cuh). H100, against 0 in two calls: -0.82% (6/6) and -0.32% (5/6)
  // on the step at c = 1, -0.84% and -0.60% (6/6 both) at c = 4, noise at c = 16; the last attention block's
  // pre-wait work ended 1.0 us after its first wait return, now 0.3 us before it (docs/PERF.md,
  // thirty-sixth session). Triggering at the GEMV's entry instead, before its copies: -0.30% (4/6) against
  // this, attention's end unchanged (noise; removed).
  int norm_next_gemv_trigger_early_max_rows = 16;
  // linear() takes the GEMV up to this many rows (0-16, at most kLinearGemvMaxRows), cuBLASLt above.
  // 16: with staged_gemv_x_global, Qwen3-30B-A3B's projections take the staged kernel up to 16 rows, 2.6%
  // faster than cuBLASLt on the step at c = 16 (docs/PERF.md, seventeenth session). A shape the staged kernel
  // cannot take runs the register GEMV, which loses to cuBLASLt above 8 rows (fifth session): 8 for models
  // whose small projections do not fit in the SMs' shared memory.
  int gemv_max_rows = 16;
  // The MoE down kernel issues its first weight loads before its PDL wait, during gate_up's tail
  // (kernels/moe_experts.h).
  bool moe_down_early_loads = true;
  // Each MoE down block copies its weight rows into shared memory whole (cp.async) before its PDL wait,
  // instead of loading them into registers a few k blocks at a time.
  bool moe_down_staged = true;
  // The staged down kernel loads its activations (gate_up's output) into registers before waiting for its
  // weight copies, in one trip (one token column a tile, I <= 1024;
  // MoeExpertsParams::down_act_before_weights) instead of kUnroll k blocks at a time after them: phase marks
  // showed its products taking 1.2-1.4 us after the copies landed at c = 1. The same results. H100, against
  // false: -0.26% on the step at c = 1, -0.84% at c = 4, -1.64% at c = 16 (6/6 each; docs/PERF.md,
  // thirty-sixth session).
  bool moe_down_act_before_weights = true;
  // Decode attention (and short queries) on tensor cores (kernels/paged_attention_mma.cu) instead of CUDA
  // cores.
  bool attention_tensor_cores = true;
  // Decode steps (one token a sequence) on tensor cores run the q/k RMSNorm + RoPE + KV append inside the
  // attention kernel (Backend::qk_norm_rope_attention, PagedAttentionParams::prologue): one launch, not two.
  bool attention_fused_prologue = true;
  // The tensor-core decode attention reads its step inputs (query starts, positions; with the folded prologue
  // the slots, norm weights and rotation) before the PDL wait; false: after it (the same results).
  bool attention_inputs_before_wait = true;
  // With the folded prologue and attention_inputs_before_wait, the first K/V tile of each block's context
  // range is copied before the PDL wait as well (PagedAttentionParams::kv_before_wait); false: after it.
  bool attention_kv_before_wait = true;
  // The tensor-core decode attention triggers the next launch (PDL) after its key tiles instead of right
  // after its wait (PagedAttentionParams::trigger_after_keys): the O projection's weight stream then starts
  // after attention's tiles, which phase marks showed 4x slower while it runs; but the partials' stores and
  // arrival then slow down as much (H100: -0.24% at c = 1, +0.61% at c = 4; docs/PERF.md, thirtieth
  // session): off.
  bool attention_trigger_after_keys = false;
  // One-token steps (groups of up to 8 query heads, head_dim 128): the tensor-core decode attention's tiles
  // with the keys as the mma rows (PagedAttentionParams::key_rows): half the accumulator registers and half
  // the mma of row tiles, whose rows 8-15 are empty at one token. Within rounding of the row tiles; 124
  // registers a thread against the row tiles' 164. The default since the forty-second session (docs/PERF.md).
  bool attention_one_token_key_rows = true;
  // With attention_one_token_key_rows: the block's 4 warps split each tile's output dims (32 each at head_dim
  // 128) instead of its keys (PagedAttentionParams::dim_split): each warp computes its 16 keys' scores, and
  // the block shares the heads' max over the tile and the probabilities through shared memory (two block
  // barriers a tile), so that the block's end needs no merge of its warps' outputs. Within rounding of the
  // row tiles. Against the warps splitting keys, H100: -0.18% at c = 1 and +0.26% at c = 4 for every warp
  // computing all the scores, which the shared probabilities beat by 0.3% at c = 1 and 4 (forty-second and
  // forty-third sessions, docs/PERF.md; that form's code is removed).
  bool attention_one_token_dim_split = true;
  // With the folded prologue, the tensor-core decode attention issues its position-free loads (norm weights,
  // inverse frequencies) before reading its place and positions, and the token's slot beside the positions
  // (PagedAttentionParams::prologue_loads_first): the block with the token's own key made four dependent
  // trips to memory before its first K/V copies, and phase marks showed the last block's pre-wait work ending
  // 1.2-1.3 us after the QKV projection (docs/step_latency.md, "Phase marks"). H100: +0.17% on the step at
  // c = 1, +0.37% at c = 4, no phase mark moved (docs/PERF.md, thirty-second session): off.
  bool attention_prologue_loads_first = false;
  // Decode steps of up to this many tokens order split attention's blocks with the context ranges outermost
  // (PagedAttentionParams::ranges_outermost): the ranges every context has are dispatched first; larger
  // steps, and all with 0, keep a tile's ranges in a row (the same results). Measured on an H200 at c = 1:
  // -0.55% (twenty-fourth session), then +0.03% for one token against none (twenty-fifth): noise, so off.
  int attention_ranges_outermost_max_tokens = 0;
  // A step's MoE with one token skips moe_align: each of its k distinct experts is its own work item.
  bool moe_one_token_direct = true;
  // The MoE combine runs inside the residual add + RMSNorm after it (Backend::moe_experts_add_rmsnorm): one
  // launch fewer a layer, wherever the MoE output needs no all-reduce.
  bool moe_fused_norm = true;
  // Decode attention cuts a context into ranges of a multiple of this many keys (a multiple of 16; rounded up
  // to a multiple of kernels::kAttentionCudaCoreSplitKeys on CUDA cores); larger: fewer blocks and fewer
  // partials to merge at short contexts.
  int attention_split_keys = 32;
  // Decode attention's ranges are at least sqrt(this * context) keys long (0: no floor): at long contexts
  // fewer, longer ranges, since merging the ranges' partials takes longer the more there are
  // (kernels/paged_attention.h).
  int attention_split_growth = 4;
  // Decode attention merges a tile of up to this many context ranges in one block (8-128); more in two
  // levels: groups of 8 ranges, then the groups (kernels/paged_attention.h).
  int attention_merge_one_level_max = 16;
  // Decode attention's ranges are at least this many keys (then a multiple of attention_split_keys); 0: no
  // such floor. 64 keys is one tile of the tensor-core kernel, whose 4 warps take 16 keys each; fewer,
  // fuller ranges also keep short contexts within attention_merge_in_o_max_ranges (docs/PERF.md).
  int attention_split_min_keys = 64;
  // A one-token decode step whose context has 2..this many ranges leaves them unmerged, and the O projection
  // merges them as it loads its activations (Backend::qk_norm_rope_attention_linear; kernels/
  // attention_partials.h): the tile's last block, its arrival count and its merge leave the chain. 0 (or
  // 1): attention always merges. At most kernels::kAttentionPartialsMaxRanges; each O block reads every
  // range's partials (16 KB a range for 32 heads of 128).
  int attention_merge_in_o_max_ranges = 4;
  // With attention_merge_in_o_max_ranges: a one-token step whose context has more ranges than that merges
  // them in groups of 8 (each group's last block, as the two-level merge does) and, where that makes 2..max
  // groups (up to 32 ranges: contexts of 513-5120 keys at the default split), leaves the groups'
  // partials to the O projection instead of a last block merging them (PagedAttentionParams::
  // defer_merge_groups). Tiles of 9-16 ranges then merge in two levels instead of one. H100, c = 1, against
  // false: -0.73% on the step with 768-token prompts (13 ranges), -1.78% with 2048 (22), -1.68% with 4096
  // (26-27), 6/6 each; at 4096 attention's chain ends 2.5 us sooner and the O projection 1.4 us later
  // (docs/PERF.md, forty-sixth session).
  bool attention_merge_in_o_groups = true;
  // Decode attention's blocks count their arrival for the merge with one acquire-release atomic instead of
  // a sequentially consistent fence on each side of a relaxed one (PagedAttentionParams::arrival_acq_rel):
  // the merge path is 4 us at c = 1, a few dependent trips to L2 behind the O projection's weight stream.
  // The same results. H100, against false: -0.41% on the step at c = 1, -0.55% at c = 4 (6/6 each;
  // docs/PERF.md, thirty-fifth session).
  bool attention_arrival_acq_rel = true;
  // The weights' copies into shared memory (staged GEMV, fused router, MoE bulk gate_up and staged down; not
  // register loads, not cuBLASLt's) carry the L2 evict_first policy, so that streaming a layer's weights
  // through L2 evicts them before what the step's small kernels read again (their code, activations,
  // routing); false: plain copies, no cache hint. Measured -3.8% on the step at c = 4 (docs/PERF.md,
  // twentieth session).
  bool weights_l2_evict_first = true;
  // With weights_l2_evict_first: the GEMVs' weight copies take the hint too; false: only the router's and
  // the MoE experts' (the GEMVs' copies plain).
  bool gemv_l2_evict_first = true;
  // The MoE combine issues up to 8 slots' loads together (kernels/moe_combine.h); false: one slot after
  // another.
  bool moe_combine_batched_loads = true;
  // RMSNorm reads its weights, and q/k norm + RoPE its positions, KV slots, norm weights and rotation, before
  // the PDL wait (during the predecessor's tail); false: after it (the same results).
  bool norm_loads_before_wait = true;
  // The MoE combine fused into the norm after it reads its routing (top-k ids and weights) before the PDL
  // wait, and only the expert rows after it; false: all after the wait (the same results).
  bool moe_combine_early_routing = true;
  // SM90+, one rank: steps of up to this many tokens (0..16) run the residual add + RMSNorm before each MoE
  // block, the router and the top-k gating as one launch of one thread-block cluster
  // (Backend::add_rmsnorm_route, kernels/router_fused.h); larger steps, and 0, run them as three launches.
  // 8: with the logits pushed into block 0 (router_fused_push_logits), -0.67% on the step at c = 8 against
  // 4; 16 was +0.48% at c = 16 (H100, docs/PERF.md, forty-ninth session).
  int router_fused_max_tokens = 8;
  // The fused router's blocks 1..7 store the residual and normed columns after block 0 has gathered the
  // logits, while it gates (kernels/router_fused.h); false: every block stores an eighth between the two
  // cluster barriers, before block 0 gates.
  bool router_fused_stores_after_gather = true;
  // The fused router's blocks store their logits straight into block 0's shared memory, so that one cluster
  // barrier replaces block 0's gather and the second barrier (RouterFusedParams::push_logits); the same
  // results. Measured -1.04% on the step at c = 1, -0.69% at c = 4 (docs/PERF.md, forty-ninth session).
  bool router_fused_push_logits = true;
  // Top-k gating (the gating kernel and the fused router's) finds each round's arg-max with two warp
  // reductions (redux.sync, SM80+) instead of five shuffle steps (kernels/topk_gating.cuh); the same picks.
  // Measured -0.9% on the step at c = 1 (docs/PERF.md, fourteenth session).
  bool topk_gating_redux = true;
  // Top-k gating runs its arg-max rounds on the logits' order (the softmax is monotone): the first round's
  // pick is the softmax's max, and the exponentials' sum runs beside the later rounds; a round is one warp
  // reduction over the lanes' sorted queues, with an exact rerun only where logits tie (kernels/topk_gating.cuh
  // warp_topk_gating_by_logits). The same picks and bits but where two logits' probabilities round equal;
  // NaN logits count as -inf, and a row whose probabilities are NaN (+inf logits) still picks valid experts.
  // bench/gating_cycles (H100, k = 8): 2592 cycles against 2851 by the probabilities (-0.21% on the step at
  // c = 1), 2491 with the sorted queues (docs/PERF.md, fifty-first session). false: the softmax first, the
  // rounds on the probabilities.
  bool topk_gating_by_logits = true;
  // SM90+: MoE launches of at least this many tokens (0: none) run gate_up streaming its weight rows through
  // shared memory by bulk copies (one instruction a row piece of 256 columns) instead of 16-byte loads of
  // every mma fragment (MoeExpertsParams::gate_up_bulk). 1: with weights_l2_evict_first, one token too
  // (-4.4% on the step at c = 1 against 2; docs/PERF.md, twentieth session).
  int moe_gate_up_bulk_min_tokens = 1;
  // The bulk-copy gate_up's stages in flight a block (2-6, 9 KB of shared memory each), in launches of more
  // than one token; in one-token launches (a decode step at c = 1) moe_gate_up_bulk_stages_one_token: 3
  // measured 0.4% faster there than 2, and 2 faster at 16 tokens (docs/PERF.md, twenty-first session).
  int moe_gate_up_bulk_stages = 2;
  int moe_gate_up_bulk_stages_one_token = 3;
  // The bulk-copy gate_up's stage width in columns, 256 or 512 (each row piece one copy of 1 KB instead of
  // 512 B, half as many copies; 17 KB of shared memory a stage, so 2 stages keep 6 blocks an SM, 3 only 4),
  // in launches of more than one token: 512 measured -1.0% on the step at c = 4; in one-token launches
  // moe_gate_up_bulk_cols_one_token: 512 (with 2 stages) measured no faster than 256 at c = 1 (docs/PERF.md,
  // thirty-fourth session).
  int moe_gate_up_bulk_cols = 512;
  int moe_gate_up_bulk_cols_one_token = 256;
  // In MoE launches of up to this many tokens the bulk-copy gate_up's block x starts at column piece
  // x % (H / cols) and wraps around, so that at any moment the blocks' copies cover the rows' whole width
  // rather than the same piece of every row (MoeExpertsParams::gate_up_bulk_rotate; the sums' order differs,
  // so not the same bits). 1: -2.1% on the step at c = 1, +0.5% at c = 4 (docs/PERF.md, thirty-fourth
  // session).
  int moe_gate_up_bulk_rotate_max_tokens = 1;
};

// Calls visit(name, field) for each bool switch and visit(name, field, lo, hi) for each int switch, with its
// allowed range; `switches` may be const. The names are the config keys (runtime.<name>).
template <typename Switches, typename Visit>
void for_each_kernel_switch(Switches& switches, Visit&& visit) {
  visit("staged_gemv", switches.staged_gemv);
  visit("staged_gemv_copy_groups", switches.staged_gemv_copy_groups, 1, 4);
  visit("staged_gemv_x_global", switches.staged_gemv_x_global);
  visit("staged_gemv_blocks_per_sm", switches.staged_gemv_blocks_per_sm, 1, 4);
  visit("staged_gemv_max_warps", switches.staged_gemv_max_warps, 4, 32);
  visit("staged_gemv_groups_in_flight", switches.staged_gemv_groups_in_flight, 0, 3);
  visit("attention_next_gemv_copy_groups", switches.attention_next_gemv_copy_groups, 0, 4);
  visit("attention_next_gemv_max_rows", switches.attention_next_gemv_max_rows, 1, 16);
  visit("norm_next_gemv_trigger_early_max_rows", switches.norm_next_gemv_trigger_early_max_rows, 0, 16);
  visit("gemv_max_rows", switches.gemv_max_rows, 0, 16);
  visit("moe_down_early_loads", switches.moe_down_early_loads);
  visit("moe_down_staged", switches.moe_down_staged);
  visit("moe_down_act_before_weights", switches.moe_down_act_before_weights);
  visit("attention_tensor_cores", switches.attention_tensor_cores);
  visit("attention_fused_prologue", switches.attention_fused_prologue);
  visit("attention_inputs_before_wait", switches.attention_inputs_before_wait);
  visit("attention_kv_before_wait", switches.attention_kv_before_wait);
  visit("attention_trigger_after_keys", switches.attention_trigger_after_keys);
  visit("attention_one_token_key_rows", switches.attention_one_token_key_rows);
  visit("attention_one_token_dim_split", switches.attention_one_token_dim_split);
  visit("attention_prologue_loads_first", switches.attention_prologue_loads_first);
  visit("attention_ranges_outermost_max_tokens", switches.attention_ranges_outermost_max_tokens, 0, 4096);
  visit("moe_one_token_direct", switches.moe_one_token_direct);
  visit("moe_fused_norm", switches.moe_fused_norm);
  visit("attention_split_keys", switches.attention_split_keys, 16, 4096);
  visit("attention_split_growth", switches.attention_split_growth, 0, 4096);
  visit("attention_merge_one_level_max", switches.attention_merge_one_level_max, 8, 128);
  visit("attention_split_min_keys", switches.attention_split_min_keys, 0, 4096);
  visit("attention_merge_in_o_max_ranges", switches.attention_merge_in_o_max_ranges, 0, 4);
  visit("attention_merge_in_o_groups", switches.attention_merge_in_o_groups);
  visit("attention_arrival_acq_rel", switches.attention_arrival_acq_rel);
  visit("weights_l2_evict_first", switches.weights_l2_evict_first);
  visit("gemv_l2_evict_first", switches.gemv_l2_evict_first);
  visit("moe_combine_batched_loads", switches.moe_combine_batched_loads);
  visit("norm_loads_before_wait", switches.norm_loads_before_wait);
  visit("moe_combine_early_routing", switches.moe_combine_early_routing);
  visit("router_fused_max_tokens", switches.router_fused_max_tokens, 0, 16);
  visit("router_fused_stores_after_gather", switches.router_fused_stores_after_gather);
  visit("router_fused_push_logits", switches.router_fused_push_logits);
  visit("topk_gating_redux", switches.topk_gating_redux);
  visit("topk_gating_by_logits", switches.topk_gating_by_logits);
  visit("moe_gate_up_bulk_min_tokens", switches.moe_gate_up_bulk_min_tokens, 0, 1 << 20);
  visit("moe_gate_up_bulk_stages", switches.moe_gate_up_bulk_stages, 2, 6);
  visit("moe_gate_up_bulk_stages_one_token", switches.moe_gate_up_bulk_stages_one_token, 2, 6);
  visit("moe_gate_up_bulk_cols", switches.moe_gate_up_bulk_cols, 256, 512);
  visit("moe_gate_up_bulk_cols_one_token", switches.moe_gate_up_bulk_cols_one_token, 256, 512);
  visit("moe_gate_up_bulk_rotate_max_tokens", switches.moe_gate_up_bulk_rotate_max_tokens, 0, 1 << 20);
}

}  // namespace tpserve
