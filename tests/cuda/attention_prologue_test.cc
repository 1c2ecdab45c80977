// The q/k norm + RoPE + KV append folded into decode attention (Backend::qk_norm_rope_attention,
// runtime.attention_fused_prologue): for decode steps on the tensor-core kernel one launch, whose output and
// cache are the two launches' bits and the CPU reference's within tolerance; other steps take the two ops.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "tests/cuda/op_test_util.h"
#include "tests/cuda/paged_cache_util.h"

namespace tpserve::cuda_test {
namespace {

struct PrologueResult {
  std::vector<float> out, k_cache, v_cache;              // GPU, eager
  std::vector<float> replay_out, replay_k, replay_v;     // GPU, the op captured and replayed once
  std::vector<float> ref_out, ref_k_cache, ref_v_cache;  // CPU: the two ops
  int kernel_nodes = -1;
};

// The switches of the tensor-core decode attention the tests vary (runtime.attention_*; the defaults
// here are the tests' base case, not necessarily the config's).
struct PrologueSwitches {
  bool inputs_before_wait = true;    // runtime.attention_inputs_before_wait
  bool kv_before_wait = true;        // runtime.attention_kv_before_wait
  bool ranges_outermost = false;     // runtime.attention_ranges_outermost_max_tokens at its largest (else 0)
  bool trigger_after_keys = false;   // runtime.attention_trigger_after_keys
  bool prologue_loads_first = true;  // runtime.attention_prologue_loads_first
  bool key_rows = false;             // runtime.attention_one_token_key_rows
  bool dim_split = false;            // runtime.attention_one_token_dim_split
};

// The op on a random cache and random qkv (the same values for every `fused`): eagerly, then captured in a
// graph and replayed (which appends the same k and v again). planned_context as in attention_test.cc;
// no_slot_seq: that sequence's token has slot -1 (nothing appended).
PrologueResult run_prologue(const AttentionCase& c, bool fused, int split_keys, int planned_context,
                            int no_slot_seq = -1, const PrologueSwitches& sw = {}) {
  CudaBackendOptions options = test_backend_options();
  options.kernels.attention_tensor_cores = true;
  options.kernels.attention_ranges_outermost_max_tokens = sw.ranges_outermost ? 4096 : 0;
  options.kernels.attention_inputs_before_wait = sw.inputs_before_wait;
  options.kernels.attention_kv_before_wait = sw.kv_before_wait;
  options.kernels.attention_trigger_after_keys = sw.trigger_after_keys;
  options.kernels.attention_prologue_loads_first = sw.prologue_loads_first;
  options.kernels.attention_one_token_key_rows = sw.key_rows;
  options.kernels.attention_one_token_dim_split = sw.dim_split;
  options.kernels.attention_split_keys = split_keys;
  options.kernels.attention_split_min_keys = 0;  // ranges of split_keys, however short
  options.kernels.attention_fused_prologue = fused;
  Backends b(options);
  std::mt19937 rng(static_cast<uint32_t>(std::hash<std::string>()(describe(c))) + planned_context +
                   split_keys + 7 * (no_slot_seq + 1));
  PagedSetup s = make_paged(b, rng, c);
  if (planned_context > 0) s.gpu_meta.max_context_len = planned_context;
  if (no_slot_seq >= 0) {
    std::vector<int32_t> slots = b.ints(s.slots.gpu);
    slots[no_slot_seq] = -1;  // decode cases: token i is sequence i's
    s.slots = b.i32({s.tokens}, slots);
    s.cpu_meta.slot_mapping = s.slots.cpu, s.gpu_meta.slot_mapping = s.slots.gpu;
  }
  const int width = (c.q_heads + 2 * c.kv_heads) * c.head_dim, d = c.head_dim;
  auto qkv_v = uniform(rng, size_t(s.tokens) * width, -3.0f, 3.0f);
  auto qn = uniform(rng, d, 0.5f, 1.5f), kn = uniform(rng, d, 0.5f, 1.5f);
  Pair qkv = b.bf16({s.tokens, width}, qkv_v), q_norm = b.bf16({d}, qn), k_norm = b.bf16({d}, kn);
  Pair q = b.output(DType::kBF16, {s.tokens, c.q_heads * d}),
       out = b.output(DType::kBF16, {s.tokens, c.q_heads * d});
  const RopeConfig rope{1e6, d};
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  PrologueResult r;
  b.cpu().qk_norm_rope_attention(qkv.cpu, c.q_heads, c.kv_heads, q_norm.cpu, k_norm.cpu, 1e-6f, rope, scale,
                                 s.cpu_meta, {s.k_cache.cpu, s.v_cache.cpu}, q.cpu, out.cpu);
  r.ref_out = cpu_floats(out.cpu), r.ref_k_cache = cpu_floats(s.k_cache.cpu);
  r.ref_v_cache = cpu_floats(s.v_cache.cpu);
  auto launch = [&] {
    b.gpu().qk_norm_rope_attention(qkv.gpu, c.q_heads, c.kv_heads, q_norm.gpu, k_norm.gpu, 1e-6f, rope, scale,
                                   s.gpu_meta, {s.k_cache.gpu, s.v_cache.gpu}, q.gpu, out.gpu);
  };
  launch();
  r.out = b.floats(out.gpu), r.k_cache = b.floats(s.k_cache.gpu), r.v_cache = b.floats(s.v_cache.gpu);
  auto graph = b.gpu().capture(launch);
  if (graph != nullptr) {
    r.kernel_nodes = graph->report().kernel_nodes;
    b.poison(out.gpu);
    graph->replay();
    r.replay_out = b.floats(out.gpu), r.replay_k = b.floats(s.k_cache.gpu),
    r.replay_v = b.floats(s.v_cache.gpu);
  }
  return r;
}

void expect_same_bits(const std::string& what, const PrologueResult& a, const PrologueResult& b) {
  expect_close(what + ": out", a.out, b.out, {0.0f, 0.0f});
  expect_close(what + ": k cache", a.k_cache, b.k_cache, {0.0f, 0.0f});
  expect_close(what + ": v cache", a.v_cache, b.v_cache, {0.0f, 0.0f});
}

void expect_matches_cpu(const std::string& what, const PrologueResult& r) {
  expect_close(what + ": out against the CPU", r.ref_out, r.out, {1e-2f * rms(r.ref_out) + 1e-6f, 1e-2f});
  expect_close(what + ": k cache against the CPU", r.ref_k_cache, r.k_cache, {2e-2f, 1e-2f});
  expect_close(what + ": v cache against the CPU", r.ref_v_cache, r.v_cache, {0.0f, 0.0f});
  expect_close(what + ": graph replay out", r.out, r.replay_out, {0.0f, 0.0f});
  expect_close(what + ": graph replay k cache", r.k_cache, r.replay_k, {0.0f, 0.0f});
  expect_close(what + ": graph replay v cache", r.v_cache, r.replay_v, {0.0f, 0.0f});
}

class AttentionPrologueTest : public ::testing::TestWithParam<AttentionCase> {};

// Decode steps: one kernel node fused, two without; the same bits; the CPU's two ops within tolerance. Ranges
// of 16, 32 and 96 keys, planned for the step's own context and for a longer one (more, shorter ranges).
TEST_P(AttentionPrologueTest, DecodeIsOneLaunchWithTheTwoOpsBits) {
  TPS_REQUIRE_CUDA_DEVICE();
  const AttentionCase& c = GetParam();
  for (int split_keys : {16, 32, 96})
    for (int planned : {0, 40960}) {
      const std::string what = describe(c) + ", ranges of " + std::to_string(split_keys) +
                               " keys, planned for " + std::to_string(planned);
      const PrologueResult fused = run_prologue(c, true, split_keys, planned);
      const PrologueResult two = run_prologue(c, false, split_keys, planned);
      EXPECT_EQ(fused.kernel_nodes, 1) << what;
      EXPECT_EQ(two.kernel_nodes, 2) << what;
      expect_same_bits(what + ", fused against two launches", fused, two);
      expect_matches_cpu(what + ", fused", fused);
    }
}

// The step inputs, or only the first K/V tile, read after the PDL wait instead of before it, the prologue's
// position-free loads after the block's place instead of before it, and the trigger after the key tiles: the
// same bits, fused or not, with and without a token lacking a slot. (Where the trigger sits cannot change
// results, by PDL's contract; this guards the switch against hangs and races, not its placement.)
TEST_P(AttentionPrologueTest, LoadsAfterTheWaitGiveTheSameBits) {
  TPS_REQUIRE_CUDA_DEVICE();
  const AttentionCase& c = GetParam();
  const int last_seq = static_cast<int>(c.query_lens.size()) - 1;
  for (bool fused : {true, false})
    for (int no_slot : {-1, last_seq}) {
      const std::string what = describe(c) + (fused ? ", fused" : ", two launches") +
                               (no_slot < 0 ? "" : ", last sequence without a slot");
      const PrologueResult early = run_prologue(c, fused, 32, 0, no_slot);
      auto variant = [&](const std::string& name, PrologueSwitches sw) {
        expect_same_bits(what + ", " + name, run_prologue(c, fused, 32, 0, no_slot, sw), early);
      };
      variant("inputs after the wait", {.inputs_before_wait = false});
      variant("K/V after the wait", {.kv_before_wait = false});
      variant("trigger after the key tiles", {.trigger_after_keys = true});
      variant("prologue loads after the block's place", {.prologue_loads_first = false});
      variant("prologue loads after the block's place, inputs after the wait",
              {.inputs_before_wait = false, .prologue_loads_first = false});
    }
}

// The blocks in range-outermost order: the same bits, fused or not, planned for the step's context and for a
// longer one, with and without a token lacking a slot.
TEST_P(AttentionPrologueTest, RangesOutermostGiveTheSameBits) {
  TPS_REQUIRE_CUDA_DEVICE();
  const AttentionCase& c = GetParam();
  const int last_seq = static_cast<int>(c.query_lens.size()) - 1;
  for (bool fused : {true, false})
    for (int planned : {0, 40960})
      for (int no_slot : {-1, last_seq}) {
        const std::string what = describe(c) + (fused ? ", fused" : ", two launches") + ", planned for " +
                                 std::to_string(planned) +
                                 (no_slot < 0 ? "" : ", last sequence without a slot");
        expect_same_bits(what + ", ranges outermost",
                         run_prologue(c, fused, 32, planned, no_slot, {.ranges_outermost = true}),
                         run_prologue(c, fused, 32, planned, no_slot));
      }
}

// Keys as the mma rows (runtime.attention_one_token_key_rows; head_dim 128, groups of up to 8), with the
// warps splitting keys and splitting dims (runtime.attention_one_token_dim_split): the CPU's results
// within tolerance, and the row tiles' within rounding (the tensor cores sum in another order), at ranges of
// 16, 32 and 96 keys planned for the step's context and a longer one, with and without a token lacking a slot
// (the token's own key patched into the last tile either way).
TEST_P(AttentionPrologueTest, KeyRowsMatchTheRowTiles) {
  TPS_REQUIRE_CUDA_DEVICE();
  const AttentionCase& c = GetParam();
  const int last_seq = static_cast<int>(c.query_lens.size()) - 1;
  for (int split_keys : {16, 32, 96})
    for (int planned : {0, 40960})
      for (int no_slot : {-1, last_seq}) {
        const PrologueResult rows = run_prologue(c, true, split_keys, planned, no_slot);
        for (bool dim_split : {false, true}) {
          const std::string what = describe(c) + ", ranges of " + std::to_string(split_keys) +
                                   " keys, planned for " + std::to_string(planned) +
                                   (no_slot < 0 ? "" : ", last sequence without a slot") + ", key rows" +
                                   (dim_split ? ", warps splitting dims" : "");
          const PrologueResult keys =
              run_prologue(c, true, split_keys, planned, no_slot, {.key_rows = true, .dim_split = dim_split});
          expect_matches_cpu(what, keys);
          expect_close(what + ": against the row tiles", rows.out, keys.out, {2e-3f * rms(rows.out), 1e-2f});
          expect_close(what + ": k cache against the row tiles", rows.k_cache, keys.k_cache, {0.0f, 0.0f});
          expect_close(what + ": v cache against the row tiles", rows.v_cache, keys.v_cache, {0.0f, 0.0f});
        }
      }
}

// A token without a cache slot (slot -1): nothing is appended, and its own key is what the cache holds, as
// with the two ops.
TEST_P(AttentionPrologueTest, TokenWithoutSlotAppendsNothing) {
  TPS_REQUIRE_CUDA_DEVICE();
  const AttentionCase& c = GetParam();
  const int seq = static_cast<int>(c.query_lens.size()) - 1;
  const std::string what = describe(c) + ", no slot for sequence " + std::to_string(seq);
  const PrologueResult fused = run_prologue(c, true, 32, 0, seq);
  const PrologueResult two = run_prologue(c, false, 32, 0, seq);
  EXPECT_EQ(fused.kernel_nodes, 1) << what;
  expect_same_bits(what + ", fused against two launches", fused, two);
  expect_matches_cpu(what + ", fused", fused);
}

INSTANTIATE_TEST_SUITE_P(
    Decode, AttentionPrologueTest,
    ::testing::Values(AttentionCase{32, 4, 128, 16, {1, 1, 1, 1, 1, 1}, {1, 15, 16, 17, 100, 1000}},
                      AttentionCase{8, 2, 64, 32, {1, 1, 1}, {5000, 33, 4097}},
                      AttentionCase{16, 1, 128, 16, {1}, {2000}},
                      AttentionCase{4, 2, 32, 16, {1, 1}, {50, 3000}},
                      AttentionCase{6, 2, 64, 16, {1, 1}, {65, 3}},  // group 3
                      AttentionCase{4, 4, 128, 16, {1, 1}, {64, 129}}));

// Steps the kernel does not fold: several tokens a sequence (speculative verification, prefill) and a
// sequence without a token. Two launches, the CPU's results.
TEST(AttentionPrologue, OtherStepsTakeTheTwoOps) {
  TPS_REQUIRE_CUDA_DEVICE();
  for (const AttentionCase& c :
       {AttentionCase{32, 4, 128, 16, {2, 1}, {100, 50}}, AttentionCase{8, 2, 64, 16, {17, 1}, {17, 40}},
        AttentionCase{6, 2, 64, 16, {1, 0, 1}, {65, 10, 3}}}) {
    const PrologueResult r = run_prologue(c, true, 32, 0);
    EXPECT_EQ(r.kernel_nodes, 2) << describe(c);
    expect_matches_cpu(describe(c), r);
  }
}

}  // namespace
}  // namespace tpserve::cuda_test
