// Attention's ranges merged by the O projection (Backend::qk_norm_rope_attention_linear,
// runtime.attention_merge_in_o_max_ranges): for a one-token decode step whose context has 2..max ranges,
// attention leaves its output unwritten and the staged GEMV merges the partials as it loads them. The
// projection's output is the same bits as attention merging them, eagerly and in a graph replay, and the
// CPU's within tolerance; contexts of one range or too many take the usual path.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "kernels/attention_partials.h"
#include "tests/cuda/op_test_util.h"
#include "tests/cuda/paged_cache_util.h"

namespace tpserve::cuda_test {
namespace {

struct MergeInOResult {
  std::vector<float> out, replay_out, ref_out;
  bool attn_written = false;  // any element of attention's own output (poisoned first) written
  uint64_t merge_launches = 0;
};

// The merge's switches of a run: runtime.attention_merge_in_o_groups and attention_merge_one_level_max.
struct MergeSwitches {
  bool groups = false;
  int one_level_max = 16;
  void apply(CudaKernelSwitches& k) const {
    k.attention_merge_in_o_groups = groups;
    k.attention_merge_one_level_max = one_level_max;
  }
};

// One sequence of `context` keys (its one token last), 32 query heads over 4 KV heads of 128 (K = 4096), an
// O projection to 384 outputs. max_ranges 0: attention merges (the switch off).
MergeInOResult run_block(int context, int max_ranges, int min_keys, int planned_context,
                         MergeSwitches merge = {}) {
  const AttentionCase c{32, 4, 128, 16, {1}, {context}};
  CudaBackendOptions options = test_backend_options();
  options.kernels.attention_split_keys = 32;
  options.kernels.attention_split_min_keys = min_keys;
  options.kernels.attention_merge_in_o_max_ranges = max_ranges;
  merge.apply(options.kernels);
  Backends b(options);
  std::mt19937 rng(static_cast<uint32_t>(context * 131 + min_keys * 7 + planned_context));  // same per case
  PagedSetup s = make_paged(b, rng, c);
  if (planned_context > 0) s.gpu_meta.max_context_len = planned_context;
  const int d = c.head_dim, width = (c.q_heads + 2 * c.kv_heads) * d, k = c.q_heads * d, n = 384;
  auto qkv_v = uniform(rng, size_t(width), -3.0f, 3.0f);
  auto qn = uniform(rng, d, 0.5f, 1.5f), kn = uniform(rng, d, 0.5f, 1.5f);
  auto wv = uniform(rng, size_t(n) * k, -1.0f / 64, 1.0f / 64);
  Pair qkv = b.bf16({1, width}, qkv_v), q_norm = b.bf16({d}, qn), k_norm = b.bf16({d}, kn),
       w = b.bf16({n, k}, wv);
  Pair q = b.output(DType::kBF16, {1, k}), attn = b.output(DType::kBF16, {1, k});
  Pair out = b.output(DType::kBF16, {1, n});
  const RopeConfig rope{1e6, d};
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  MergeInOResult r;
  b.cpu().qk_norm_rope_attention_linear(qkv.cpu, c.q_heads, c.kv_heads, q_norm.cpu, k_norm.cpu, 1e-6f, rope,
                                        scale, s.cpu_meta, {s.k_cache.cpu, s.v_cache.cpu}, q.cpu, attn.cpu,
                                        w.cpu, out.cpu);
  r.ref_out = cpu_floats(out.cpu);
  auto launch = [&] {
    b.gpu().qk_norm_rope_attention_linear(qkv.gpu, c.q_heads, c.kv_heads, q_norm.gpu, k_norm.gpu, 1e-6f, rope,
                                          scale, s.gpu_meta, {s.k_cache.gpu, s.v_cache.gpu}, q.gpu, attn.gpu,
                                          w.gpu, out.gpu);
  };
  launch();
  r.out = b.floats(out.gpu);
  for (float v : b.floats(attn.gpu)) r.attn_written |= !std::isnan(v);
  r.merge_launches = b.gpu().gemv_attention_merge_launches();
  auto graph = b.gpu().capture(launch);
  if (graph != nullptr) {
    b.poison(out.gpu);
    graph->replay();
    r.replay_out = b.floats(out.gpu);
  }
  return r;
}

// Contexts of 1 range, 2-4 ranges and more (ranges of 32 keys, or of at least 64), planned for the context
// and for a longer one; the switch at 2 and 4 ranges.
TEST(AttentionMergeInO, SameBitsAsAttentionMerging) {
  TPS_REQUIRE_CUDA_DEVICE();
  for (int context : {20, 70, 100, 190, 250, 1000})
    for (int min_keys : {0, 64})
      for (int planned : {0, 8192})
        for (int max_ranges : {2, 4}) {
          // The planned split count is at least these contexts' ranges, and their ranges are bound by
          // split_keys, min_keys or the square-root floor, not by it: 128 gives the same ranges.
          const int ranges =
              kernels::attention_active_ranges(context, kernels::kAttentionMaxSplits, 32, 4, min_keys);
          // Planned for its own 20 keys, the step has one range planned: no partials at all.
          const bool partials = !(planned == 0 && context <= 32);
          const bool merged_in_o = ranges >= 2 && ranges <= max_ranges;
          const std::string what = std::to_string(context) + " keys, ranges of at least " +
                                   std::to_string(min_keys) + " keys (" + std::to_string(ranges) +
                                   " ranges), planned for " + std::to_string(planned) +
                                   ", merged in O up to " + std::to_string(max_ranges);
          const MergeInOResult base = run_block(context, 0, min_keys, planned);
          const MergeInOResult got = run_block(context, max_ranges, min_keys, planned);
          EXPECT_EQ(base.merge_launches, 0u) << what;
          EXPECT_EQ(got.merge_launches, partials ? 1u : 0u) << what << ": partials given to the projection";
          EXPECT_TRUE(base.attn_written) << what;
          EXPECT_EQ(got.attn_written, !merged_in_o) << what << ": attention's rows written or not";
          expect_close(what + ": against attention merging", base.out, got.out, {0.0f, 0.0f});
          expect_close(what + ": against the CPU", got.ref_out, got.out,
                       {2e-2f * rms(got.ref_out) + 1e-5f, 2e-2f});
          expect_close(what + ": graph replay", got.out, got.replay_out, {0.0f, 0.0f});
        }
}

// What a one-token step leaves its consumer, by the context's range count (host arithmetic: no GPU).
TEST(AttentionMergeInO, DeferredPartialsByRangeCount) {
  using kernels::attention_deferred_partials;
  for (int ranges = 1; ranges <= 64; ++ranges)
    for (int max_ranges : {0, 1, 2, 4})
      for (bool groups : {false, true}) {
        const kernels::DeferredPartials d = attention_deferred_partials(ranges, max_ranges, groups);
        const int group_count = (ranges + 7) / 8;
        const std::string what = std::to_string(ranges) + " ranges, up to " + std::to_string(max_ranges) +
                                 (groups ? ", groups" : "");
        if (ranges >= 2 && ranges <= max_ranges) {
          EXPECT_EQ(d.count, ranges) << what;
          EXPECT_EQ(d.stride, 1) << what;
        } else if (groups && ranges > max_ranges && group_count >= 2 && group_count <= max_ranges) {
          EXPECT_EQ(d.count, group_count) << what;
          EXPECT_EQ(d.stride, kernels::kAttentionMergeGroup) << what;
        } else {
          EXPECT_EQ(d.count, 0) << what;
        }
      }
  // The default bound of 4: groups from 9 ranges (2 groups) to 32 (4), none from 33.
  EXPECT_EQ(attention_deferred_partials(8, 4, true).count, 0);
  EXPECT_EQ(attention_deferred_partials(9, 4, true).count, 2);
  EXPECT_EQ(attention_deferred_partials(32, 4, true).count, 4);
  EXPECT_EQ(attention_deferred_partials(33, 4, true).count, 0);
}

// runtime.attention_merge_in_o_groups: contexts of 5-42 ranges (ranges of at least 64 keys), planned for
// the context and for a longer one. Where the ranges make 2-4 groups of 8 (9-32 ranges), attention merges
// each group and the O projection the groups: the same bits as attention merging in two levels (groups of
// 8, then the groups: one-level merges up to 8 ranges on both sides), within tolerance of the CPU; other
// contexts take the usual path.
TEST(AttentionMergeInO, GroupsSameBitsAsTwoLevelMerge) {
  TPS_REQUIRE_CUDA_DEVICE();
  const MergeSwitches two_level{false, kernels::kAttentionMergeGroup},
      groups{true, kernels::kAttentionMergeGroup};
  // 576 and 1600 keys: 9 and 17 ranges, whose last group holds one range (its own partial, no merge).
  for (int context : {300, 576, 600, 1000, 1600, 2000, 4000, 8000})
    for (int planned : {0, 8192}) {
      const int ranges = kernels::attention_active_ranges(context, kernels::kAttentionMaxSplits, 32, 4, 64);
      const kernels::DeferredPartials deferred = kernels::attention_deferred_partials(ranges, 4, true);
      const std::string what = std::to_string(context) + " keys (" + std::to_string(ranges) +
                               " ranges), planned for " + std::to_string(planned) + ", " +
                               std::to_string(deferred.count) + " partials merged in O, " +
                               std::to_string(deferred.stride) + " ranges apart";
      const MergeInOResult base = run_block(context, 0, 64, planned, two_level);
      const MergeInOResult got = run_block(context, 4, 64, planned, groups);
      EXPECT_EQ(deferred.count > 0, ranges > 8 && ranges <= 32) << what;
      EXPECT_EQ(got.merge_launches, 1u) << what << ": partials given to the projection";
      EXPECT_TRUE(base.attn_written) << what;
      EXPECT_EQ(got.attn_written, deferred.count == 0) << what << ": attention's rows written or not";
      expect_close(what + ": against attention merging", base.out, got.out, {0.0f, 0.0f});
      expect_close(what + ": against the CPU", got.ref_out, got.out,
                   {2e-2f * rms(got.ref_out) + 1e-5f, 2e-2f});
      expect_close(what + ": graph replay", got.out, got.replay_out, {0.0f, 0.0f});
    }
}

// Steps that do not take it: two sequences (two rows), and the switch at 1 (no range count is 2..1).
TEST(AttentionMergeInO, OtherStepsMergeInAttention) {
  TPS_REQUIRE_CUDA_DEVICE();
  const MergeInOResult one = run_block(190, 1, 0, 0);
  EXPECT_EQ(one.merge_launches, 0u);
  EXPECT_TRUE(one.attn_written);
  CudaBackendOptions options = test_backend_options();
  options.kernels.attention_merge_in_o_max_ranges = 4;
  Backends b(options);
  std::mt19937 rng(5);
  const AttentionCase c{32, 4, 128, 16, {1, 1}, {190, 100}};
  PagedSetup s = make_paged(b, rng, c);
  const int d = c.head_dim, width = (c.q_heads + 2 * c.kv_heads) * d, k = c.q_heads * d;
  auto qkv_v = uniform(rng, size_t(2) * width, -3.0f, 3.0f);
  auto nw = uniform(rng, d, 0.5f, 1.5f), wv = uniform(rng, size_t(256) * k, -1.0f / 64, 1.0f / 64);
  Pair qkv = b.bf16({2, width}, qkv_v), norm = b.bf16({d}, nw), w = b.bf16({256, k}, wv);
  Pair q = b.output(DType::kBF16, {2, k}), attn = b.output(DType::kBF16, {2, k}),
       out = b.output(DType::kBF16, {2, 256});
  const RopeConfig rope{1e6, d};
  b.cpu().qk_norm_rope_attention_linear(qkv.cpu, c.q_heads, c.kv_heads, norm.cpu, norm.cpu, 1e-6f, rope, 0.1f,
                                        s.cpu_meta, {s.k_cache.cpu, s.v_cache.cpu}, q.cpu, attn.cpu, w.cpu,
                                        out.cpu);
  b.gpu().qk_norm_rope_attention_linear(qkv.gpu, c.q_heads, c.kv_heads, norm.gpu, norm.gpu, 1e-6f, rope, 0.1f,
                                        s.gpu_meta, {s.k_cache.gpu, s.v_cache.gpu}, q.gpu, attn.gpu, w.gpu,
                                        out.gpu);
  EXPECT_EQ(b.gpu().gemv_attention_merge_launches(), 0u);
  const std::vector<float> ref = cpu_floats(out.cpu);
  expect_close("two sequences against the CPU", ref, b.floats(out.gpu), {2e-2f * rms(ref) + 1e-5f, 2e-2f});
}

// One graph, captured at `captured` keys, replayed with the token moved to each of `contexts`: each replay
// decides from the position whether the O projection merges (and what), and its output is the bits of a
// graph whose attention always merges (with the same one-level bound), fed the same positions and slots.
void expect_replays_decide_from_the_position(int captured, const std::vector<int>& contexts,
                                             MergeSwitches merge) {
  const AttentionCase c{32, 4, 128, 16, {1}, {captured}};
  const int d = c.head_dim, width = (c.q_heads + 2 * c.kv_heads) * d, k = c.q_heads * d, n = 256;
  struct Side {
    std::unique_ptr<Backends> b;
    PagedSetup s;
    Pair qkv, norm, w, q, attn, out;
    std::unique_ptr<StepGraph> graph;
  };
  Side sides[2];
  for (int i = 0; i < 2; ++i) {
    CudaBackendOptions options = test_backend_options();
    options.kernels.attention_split_min_keys = 64;
    options.kernels.attention_merge_in_o_max_ranges = i == 0 ? 0 : 4;
    merge.apply(options.kernels);
    Side& x = sides[i];
    x.b = std::make_unique<Backends>(options);
    std::mt19937 rng(77);  // the same inputs on both sides
    x.s = make_paged(*x.b, rng, c);
    auto qkv_v = uniform(rng, size_t(width), -3.0f, 3.0f);
    auto nw = uniform(rng, d, 0.5f, 1.5f), wv = uniform(rng, size_t(n) * k, -1.0f / 64, 1.0f / 64);
    x.qkv = x.b->bf16({1, width}, qkv_v), x.norm = x.b->bf16({d}, nw), x.w = x.b->bf16({n, k}, wv);
    x.q = x.b->output(DType::kBF16, {1, k}), x.attn = x.b->output(DType::kBF16, {1, k});
    x.out = x.b->output(DType::kBF16, {1, n});
    x.graph = x.b->gpu().capture([&x, c] {
      x.b->gpu().qk_norm_rope_attention_linear(
          x.qkv.gpu, c.q_heads, c.kv_heads, x.norm.gpu, x.norm.gpu, 1e-6f, RopeConfig{1e6, c.head_dim},
          0.088f, x.s.gpu_meta, {x.s.k_cache.gpu, x.s.v_cache.gpu}, x.q.gpu, x.attn.gpu, x.w.gpu, x.out.gpu);
    });
    if (x.graph == nullptr) GTEST_SKIP() << "the CUDA backend captured no graph";
  }
  const std::vector<int32_t> table = sides[0].b->ints(sides[0].s.tables.gpu);
  for (int context : contexts) {
    const int32_t pos = context - 1, slot = table[pos / c.block_size] * c.block_size + pos % c.block_size;
    const int ranges = kernels::attention_active_ranges(context, kernels::kAttentionMaxSplits, 32, 4, 64);
    const bool merged_in_o = kernels::attention_deferred_partials(ranges, 4, merge.groups).count > 0;
    std::vector<float> outs[2];
    bool attn_written[2] = {false, false};
    for (int i = 0; i < 2; ++i) {
      Side& x = sides[i];
      x.b->gpu().copy_from_host(x.s.positions.gpu, &pos);
      x.b->gpu().copy_from_host(x.s.slots.gpu, &slot);
      x.b->poison(x.out.gpu);
      x.b->poison(x.attn.gpu);
      x.graph->replay();
      outs[i] = x.b->floats(x.out.gpu);
      for (float v : x.b->floats(x.attn.gpu)) attn_written[i] |= !std::isnan(v);
    }
    const std::string what =
        "replay at " + std::to_string(context) + " keys (" + std::to_string(ranges) + " ranges)";
    EXPECT_TRUE(attn_written[0]) << what;
    EXPECT_EQ(attn_written[1], !merged_in_o) << what << ": attention's rows written or not";
    expect_close(what + ": merged in O against in attention", outs[0], outs[1], {0.0f, 0.0f});
  }
}

// Captured at 250 keys (4 ranges of at least 64), replayed at 20, 100, 190 and 250 keys (1, 2, 3, 4 ranges).
TEST(AttentionMergeInO, ReplaysDecideFromThePosition) {
  TPS_REQUIRE_CUDA_DEVICE();
  expect_replays_decide_from_the_position(250, {20, 100, 190, 250}, {});
}

// With runtime.attention_merge_in_o_groups: captured at 4000 keys (32 ranges, 4 groups), replayed at 100,
// 300, 600, 2000 and 4000 keys (2, 5, 10, 21, 32 ranges: ranges merged in O, attention merging alone, then
// groups merged in O), then at 576 keys (9 ranges: a last group of one range) and at 300 again (a tile
// counter used after steps that left it alone).
TEST(AttentionMergeInO, GroupReplaysDecideFromThePosition) {
  TPS_REQUIRE_CUDA_DEVICE();
  expect_replays_decide_from_the_position(4000, {100, 300, 600, 2000, 4000, 576, 300},
                                          {true, kernels::kAttentionMergeGroup});
}

}  // namespace
}  // namespace tpserve::cuda_test
