// CUDA attention ops against the CPU reference: q/k norm + RoPE + KV append, and paged attention for decode
// (contexts across block boundaries, long ones that take the split path), short queries, the in-kernel merge
// of splits (also repeated and replayed in a graph) and prefill (chunked, mixed).
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <numeric>
#include <tuple>

#include "kernels/paged_attention.h"
#include "tests/cuda/op_test_util.h"
#include "tests/cuda/paged_cache_util.h"

namespace tpserve::cuda_test {
namespace {

class PagedAttentionTest : public ::testing::TestWithParam<AttentionCase> {};

// One attention op: its inputs on both backends, the CPU reference's output, and the GPU launch (which a
// test may repeat). planned_context: the longest context the GPU plans its split for (0: the step's own). A
// captured graph plans for max_seq_len and runs shorter contexts. The inputs depend only on the case and
// planned_context (the seed), so runs of the same case on differently configured backends share one CPU
// reference: ref_cache, where given, supplies it (or, empty, receives it), since the CPU op at long contexts
// takes most of these tests' time.
struct AttentionRun {
  AttentionCase c;
  PagedSetup s;
  Pair q, out;
  float scale = 0.0f;
  std::vector<float> ref;

  AttentionRun(Backends& b, const AttentionCase& attention_case, int planned_context,
               std::vector<float>* ref_cache = nullptr)
      : c(attention_case) {
    std::mt19937 rng(static_cast<uint32_t>(std::hash<std::string>()(describe(c))) + planned_context);
    s = make_paged(b, rng, c);
    if (planned_context > 0) s.gpu_meta.max_context_len = planned_context;
    const int width = c.q_heads * c.head_dim;
    auto qv = uniform(rng, size_t(s.tokens) * width, -2.0f, 2.0f);
    q = b.bf16({s.tokens, width}, qv);
    out = b.output(DType::kBF16, {s.tokens, width});
    scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    if (ref_cache != nullptr && !ref_cache->empty()) {
      ref = *ref_cache;
      return;
    }
    b.cpu().attention(q.cpu, c.q_heads, c.kv_heads, scale, {s.k_cache.cpu, s.v_cache.cpu}, s.cpu_meta,
                      out.cpu);
    ref = cpu_floats(out.cpu);
    if (ref_cache != nullptr) *ref_cache = ref;
  }
  void launch_gpu(Backends& b) const {
    b.gpu().attention(q.gpu, c.q_heads, c.kv_heads, scale, {s.k_cache.gpu, s.v_cache.gpu}, s.gpu_meta,
                      out.gpu);
  }
  // Long contexts average many values: relative to the output's scale, or a masking error would hide.
  void expect_matches(Backends& b, const std::string& what) const {
    expect_close(what + " " + describe(c), ref, b.floats(out.gpu), {1e-2f * rms(ref) + 1e-6f, 1e-2f});
  }
  // The context ranges the backend plans for this step (as CudaBackend::attention does).
  int planned_splits(Backends& b, bool tensor_cores) const {
    kernels::PagedAttentionParams p;
    p.num_seqs = s.gpu_meta.num_seqs;
    p.num_q_heads = c.q_heads;
    p.num_kv_heads = c.kv_heads;
    p.head_dim = c.head_dim;
    p.max_query_len = s.gpu_meta.max_query_len;
    // Backends' default workspace: these steps' partials are far smaller.
    p.split_growth = 0;  // the backends these tests plan for (attention_options)
    kernels::plan_decode_splits(p, s.gpu_meta.max_context_len, s.tokens, b.gpu().num_sms(), size_t(255) << 20,
                                kernels::attention_decode_blocks_per_sm(tensor_cores, c.head_dim));
    return p.num_splits;
  }
};

// A backend with the split decode path on tensor cores or on CUDA cores (runtime.attention_tensor_cores),
// context ranges a multiple of split_keys keys (runtime.attention_split_keys) and, with growth > 0, at least
// sqrt(growth x context) keys long (runtime.attention_split_growth; 0 here unless given, so that the ranges
// below are the multiples of split_keys the comments count); tiles of up to one_level_max ranges merged in
// one block (runtime.attention_merge_one_level_max).
CudaBackendOptions attention_options(bool tensor_cores, int split_keys = 32, int growth = 0,
                                     int one_level_max = 16, bool ranges_outermost = false) {
  CudaBackendOptions options = test_backend_options();
  options.kernels.attention_ranges_outermost_max_tokens = ranges_outermost ? 4096 : 0;
  options.kernels.attention_tensor_cores = tensor_cores;
  options.kernels.attention_split_keys = split_keys;
  options.kernels.attention_split_min_keys = 0;  // ranges of split_keys at the cases' short contexts
  options.kernels.attention_split_growth = growth;
  options.kernels.attention_merge_one_level_max = one_level_max;
  return options;
}

// Both kernels; ranges of 16 keys (one warp's share of a tensor-core tile; rounded up to 32 on CUDA cores),
// of 32, of 96 (1.5 of the tensor-core kernel's 64-key tiles) and of 256; with the square-root floor on
// ranges: the default (4) and a large one (256: a few ranges of over a thousand keys at 5000); and ranges of
// 16 keys merged in one level however many there are (up to 128).
void expect_attention_matches_cpu(const AttentionCase& c, int planned_context) {
  struct Split {
    int keys, growth, one_level_max;
  };
  std::vector<float> ref;  // the CPU reference, computed in the first run and shared by the others
  for (bool tensor_cores : {false, true})
    for (Split split : {Split{16, 0, 8}, Split{32, 0, 8}, Split{96, 0, 8}, Split{256, 0, 8}, Split{32, 4, 16},
                        Split{16, 256, 8}, Split{16, 0, 128}}) {
      Backends b(attention_options(tensor_cores, split.keys, split.growth, split.one_level_max));
      AttentionRun run(b, c, planned_context, &ref);
      run.launch_gpu(b);
      run.expect_matches(b, std::string(tensor_cores ? "attention (tensor cores" : "attention (CUDA cores") +
                                ", ranges of " + std::to_string(split.keys) + " keys, growth " +
                                std::to_string(split.growth) + ", one-level merge up to " +
                                std::to_string(split.one_level_max) + ")");
    }
}

TEST_P(PagedAttentionTest, MatchesCpu) {
  TPS_REQUIRE_CUDA_DEVICE();
  expect_attention_matches_cpu(GetParam(), 0);
}

TEST_P(PagedAttentionTest, MatchesCpuWhenPlannedForALongerContext) {
  TPS_REQUIRE_CUDA_DEVICE();
  expect_attention_matches_cpu(GetParam(), 40960);
}

// The case on a backend with a switch off and on (options(tensor_cores, on)) for each kernel in
// `tensor_cores`, planned for the step's context and for a longer one (most blocks past every context): the
// same bits either way, and the CPU's values within tolerance.
void expect_same_bits_with_switch(const AttentionCase& c, const std::string& switch_name,
                                  std::initializer_list<bool> tensor_cores,
                                  const std::function<CudaBackendOptions(bool, bool)>& options) {
  for (int planned : {0, 40960}) {
    std::vector<float> ref;  // the CPU reference: the inputs depend on the case and `planned` only
    for (bool cores : tensor_cores) {
      std::vector<float> out[2];
      for (bool on : {false, true}) {
        Backends b(options(cores, on));
        AttentionRun run(b, c, planned, &ref);
        b.poison(run.out.gpu);
        run.launch_gpu(b);
        out[on] = b.floats(run.out.gpu);
      }
      const std::string what = describe(c) + (cores ? ", tensor cores" : ", CUDA cores") + ", planned for " +
                               std::to_string(planned);
      expect_close(what + ": " + switch_name + " on against off", out[0], out[1], {0.0f, 0.0f});
      expect_close(what + ": against the CPU", ref, out[1], {1e-2f * rms(ref) + 1e-6f, 1e-2f});
    }
  }
}

// The blocks in range-outermost order (runtime.attention_ranges_outermost_max_tokens): the same bits as tile
// by tile, on both kernels.
TEST_P(PagedAttentionTest, RangesOutermostGiveTheSameBits) {
  TPS_REQUIRE_CUDA_DEVICE();
  expect_same_bits_with_switch(GetParam(), "ranges outermost", {false, true},
                               [](bool cores, bool on) { return attention_options(cores, 32, 4, 16, on); });
}

INSTANTIATE_TEST_SUITE_P(
    Decode, PagedAttentionTest,
    ::testing::Values(AttentionCase{32, 4, 128, 16, {1, 1, 1, 1, 1, 1}, {1, 15, 16, 17, 100, 1000}},
                      AttentionCase{8, 2, 64, 32, {1, 1, 1}, {5000, 33, 4097}},
                      AttentionCase{4, 4, 128, 16, {1, 1}, {300, 7}},
                      AttentionCase{16, 1, 128, 16, {1}, {2000}}, AttentionCase{32, 4, 128, 16, {1}, {32768}},
                      AttentionCase{6, 2, 64, 16, {1, 0, 1}, {65, 10, 3}},
                      AttentionCase{4, 2, 32, 16, {1, 1}, {50, 3000}},
                      // cache blocks smaller than a copy's key step (8 keys at D = 128, 32 at 32), and larger
                      // than a 64-key tile
                      AttentionCase{8, 2, 128, 4, {1, 1}, {70, 1001}}, AttentionCase{4, 2, 32, 1, {1}, {200}},
                      AttentionCase{32, 4, 128, 128, {1, 1}, {130, 3000}}));

// Short queries (a speculative step's 1 + k rows, up to kAttentionMaxSplitQueryLen) take the split decode
// path: several tokens share a tile, the context is cut into ranges, and each token masks the keys past it.
INSTANTIATE_TEST_SUITE_P(Verify, PagedAttentionTest,
                         ::testing::Values(AttentionCase{32, 4, 128, 16, {2, 3, 5, 1}, {2000, 160, 4097, 33}},
                                           AttentionCase{8, 2, 64, 32, {4, 8}, {5000, 700}},
                                           AttentionCase{16, 1, 128, 16, {3}, {3000}},
                                           AttentionCase{32, 4, 128, 16, {5, 4}, {32768, 64}},
                                           AttentionCase{4, 2, 32, 16, {2, 0, 7}, {2, 10, 95}},
                                           // group 1: every query row of up to 8 tokens in one tile
                                           AttentionCase{4, 4, 128, 16, {3, 8}, {100, 700}},
                                           // group 3 does not divide the 16-row tile: 5 tokens a tile
                                           AttentionCase{6, 2, 64, 16, {5, 8}, {300, 1000}}));

// The in-kernel merge of split launches. A tile's active splits are its non-empty ranges, cut from the
// longest context of its rows: tiles of one sequence can have different counts, a row's range past its own
// position has a -inf partial, and a launch of several splits can have tiles of one range (written directly).
// Planned for the step's own context, with 132 SMs (a 32-key range at most contexts here):
//   (1, 20), (1, 32) one range of 2 planned, (1, 33) two (the second 1 key);
//   group 8 (2 tokens a tile): (4, 65) tiles of 63 and 65 keys: 2 and 3 ranges, the row at position 63
//     -inf in the third; (5, 161) tiles of 158, 160, 161 keys: 5, 5, 6 ranges;
//   group 16 (1 token a tile): (3, 97) tiles of 95, 96, 97 keys: 3, 3, 4 ranges;
//   group 2 (8 tokens a tile): (3, 64), (2, 65) 2 and 3 ranges, position 63 -inf in the third;
//   (1, 5), (1, 31): one range whatever the plan (the planned-for-longer test splits that launch);
//   (1, 256), (1, 257): 8 and 9 ranges, each side of the merge's chunk of 8 splits and of its groups of 8
//   (kAttentionMergeGroup: 9 ranges merge as a group of 8 and a group of one) (with no square-root floor on
//   ranges; the default floor makes 257 keys 5 ranges of 64);
//   (1, 400), (1, 1000): 13 ranges (groups of 8 and 5) and 32 (four groups of 8).
INSTANTIATE_TEST_SUITE_P(SplitMerge, PagedAttentionTest,
                         ::testing::Values(AttentionCase{32, 4, 128, 16, {1, 1, 1}, {20, 32, 33}},
                                           AttentionCase{32, 4, 128, 16, {4, 5}, {65, 161}},
                                           AttentionCase{16, 1, 64, 16, {3}, {97}},
                                           AttentionCase{4, 2, 32, 16, {3, 2}, {64, 65}},
                                           AttentionCase{8, 2, 64, 16, {1, 1}, {5, 31}},
                                           AttentionCase{32, 4, 128, 16, {1, 1}, {256, 257}},
                                           AttentionCase{32, 4, 128, 16, {1, 1}, {400, 1000}}));

// The ranges plan_decode_splits gives a decode step of `seqs` sequences of Qwen3-30B-A3B's heads (32 / 4 x
// 128) at `context` keys, on 132 SMs holding `blocks_per_sm` attention blocks each.
int planned_decode_splits(int seqs, int context, int split_keys, int growth, int blocks_per_sm = 4) {
  kernels::PagedAttentionParams p;
  p.num_seqs = seqs, p.num_q_heads = 32, p.num_kv_heads = 4, p.head_dim = 128, p.max_query_len = 1;
  p.split_keys = split_keys, p.split_growth = growth;
  kernels::plan_decode_splits(p, context, seqs, 132, size_t(255) << 20, blocks_per_sm);
  return p.num_splits;
}

// The split plan and the ranges follow runtime.attention_split_keys (host code only: runs without a GPU).
TEST(AttentionSplitPlan, RangesFollowSplitKeys) {
  EXPECT_EQ(planned_decode_splits(1, 1024, 32, 0), 32);
  EXPECT_EQ(planned_decode_splits(1, 1024, 256, 0), 4);
  EXPECT_EQ(planned_decode_splits(1, 160, 32, 0), 5);
  EXPECT_EQ(planned_decode_splits(1, 160, 16, 0), 10);
  EXPECT_EQ(kernels::attention_keys_per_split(160, 32, 16, 0), 16);
  EXPECT_EQ(kernels::attention_keys_per_split(170, 10, 16, 0), 32);  // 17 keys a range, rounded up to 16s
  EXPECT_EQ(kernels::attention_keys_per_split(160, 32, 32, 0), 32);
  EXPECT_EQ(kernels::attention_keys_per_split(160, 32, 64, 0), 64);
  EXPECT_EQ(kernels::attention_keys_per_split(160, 4, 256, 0), 256);
  EXPECT_EQ(kernels::attention_keys_per_split(5000, 4, 96, 0), 1344);  // 1250 keys a range, rounded up to 96s
}

// Both block orders place every (token tile, sequence, KV head, range) of the grid exactly once; with the
// ranges outermost, the grid's linear order (x fastest, as blocks are dispatched) runs range by range.
TEST(AttentionBlockPlace, EachPlaceOnceAndRangesOutermostInOrder) {
  for (int tiles : {1, 3})
    for (int splits : {1, 2, 7})
      for (int seqs : {1, 3})
        for (int heads : {1, 4})
          for (bool outermost : {false, true}) {
            const int gx = tiles * splits, total = gx * seqs * heads;
            std::vector<int> seen(total, 0);
            int last_split = 0;
            for (int i = 0; i < total; ++i) {
              const auto at = kernels::attention_block_place(i % gx, i / gx % seqs, i / gx / seqs, gx, seqs,
                                                             heads, splits, outermost);
              ASSERT_TRUE(at.tile >= 0 && at.tile < tiles && at.seq >= 0 && at.seq < seqs &&
                          at.kv_head >= 0 && at.kv_head < heads && at.split >= 0 && at.split < splits);
              ++seen[((at.tile * seqs + at.seq) * heads + at.kv_head) * splits + at.split];
              if (outermost) {
                EXPECT_GE(at.split, last_split) << "block " << i;
                last_split = at.split;
              } else {
                EXPECT_EQ(at.split, i % gx % splits);
              }
            }
            for (int n : seen)
              EXPECT_EQ(n, 1) << tiles << " tiles, " << splits << " ranges, " << seqs << " seqs, " << heads
                              << " heads, outermost " << outermost;
          }
}

// Ranges of at least split_min_keys keys (runtime.attention_split_min_keys): short contexts take fewer
// ranges, long ones (whose square-root floor is longer) the same.
TEST(AttentionSplitPlan, MinKeysLengthenShortRangesOnly) {
  using kernels::attention_active_ranges;
  using kernels::attention_keys_per_split;
  EXPECT_EQ(attention_keys_per_split(190, 128, 32, 4), 32);
  EXPECT_EQ(attention_keys_per_split(190, 128, 32, 4, 64), 64);
  EXPECT_EQ(attention_active_ranges(190, 128, 32, 4, 0), 6);
  EXPECT_EQ(attention_active_ranges(190, 128, 32, 4, 64), 3);
  EXPECT_EQ(attention_keys_per_split(190, 128, 32, 4, 48), 64);   // 48 rounded up to the 32-key quantum
  EXPECT_EQ(attention_keys_per_split(2000, 128, 32, 4, 64), 96);  // sqrt(8000) = 89.4: the floor binds
  EXPECT_EQ(attention_active_ranges(20, 128, 32, 4, 64), 1);
}

// runtime.attention_split_growth: ranges of at least sqrt(growth x context) keys, so a long context runs as
// about sqrt(context / growth) ranges; short contexts keep their ranges of split_keys.
TEST(AttentionSplitPlan, LongContextsTakeFewerLongerRanges) {
  using kernels::attention_keys_per_split;
  EXPECT_EQ(attention_keys_per_split(192, 128, 32, 4), 32);     // sqrt(768) = 27.7: no change
  EXPECT_EQ(attention_keys_per_split(256, 128, 32, 4), 32);     // sqrt(1024) = 32 exactly
  EXPECT_EQ(attention_keys_per_split(257, 128, 32, 4), 64);     // 32.06
  EXPECT_EQ(attention_keys_per_split(4096, 128, 32, 4), 128);   // 32 ranges
  EXPECT_EQ(attention_keys_per_split(32768, 128, 32, 4), 384);  // sqrt(131072) = 362.04: 86 ranges
  EXPECT_EQ(attention_keys_per_split(4096, 128, 32, 16), 256);  // 16 ranges
  EXPECT_EQ(attention_keys_per_split(4096, 8, 32, 4), 512);     // the planned ranges bound it first
  // The plan launches no more ranges than the longest context has.
  EXPECT_EQ(planned_decode_splits(1, 4096, 32, 4), 32);
  EXPECT_EQ(planned_decode_splits(1, 192, 32, 4), 6);
  EXPECT_EQ(planned_decode_splits(1, 4096, 32, 0), 128);
}

// The plan fills one wave of the SMs' resident blocks, not more: 8 sequences x 4 KV heads at 32k context,
// 3 blocks an SM (the tensor-core kernel at head_dim 128 on an H200): 12 ranges a tile, 384 blocks of 396.
TEST(AttentionSplitPlan, OneWaveOfResidentBlocks) {
  EXPECT_EQ(planned_decode_splits(8, 32768, 32, 0, 3), 12);
  EXPECT_EQ(planned_decode_splits(8, 32768, 32, 0, 4), 16);
  EXPECT_EQ(planned_decode_splits(200, 32768, 32, 0, 3), 1);  // more tiles than 3 a SM: one range each
}

// Every launch of a split step leaves its arrival counters at 0 (the last block of a tile resets them): the
// same launches repeated, eagerly and as one captured graph replayed, give the reference each time (a counter
// left non-zero would leave a tile unmerged: the poisoned output), and give the same bits each time (the
// merge order does not depend on which block is last). Steps of different shapes share the counters. With
// the arrivals counted by fences around a relaxed atomic or by one acquire-release atomic
// (runtime.attention_arrival_acq_rel): the same bits, since a merge reads every partial either way.
// Parameters: tensor cores, acquire-release arrivals.
class PagedAttentionSplits : public ::testing::TestWithParam<std::tuple<bool, bool>> {};

// Each run's output from a fresh backend whose arrivals are fences around a relaxed atomic, for the
// same-bits check; fills refs with the CPU references (one a case), which the caller's runs reuse.
std::vector<std::vector<float>> fence_arrival_outputs(const std::vector<AttentionCase>& cases,
                                                      bool tensor_cores,
                                                      std::vector<std::vector<float>>& refs) {
  CudaBackendOptions options = attention_options(tensor_cores);
  options.kernels.attention_arrival_acq_rel = false;
  Backends b(options);
  std::vector<std::vector<float>> out;
  for (size_t i = 0; i < cases.size(); ++i) {
    AttentionRun run(b, cases[i], 40960, &refs[i]);
    b.poison(run.out.gpu);
    run.launch_gpu(b);
    out.push_back(b.floats(run.out.gpu));
  }
  return out;
}

TEST_P(PagedAttentionSplits, RepeatedLaunchesAndGraphReplaysMergeEveryTime) {
  TPS_REQUIRE_CUDA_DEVICE();
  const auto [tensor_cores, acq_rel] = GetParam();
  const std::vector<AttentionCase> cases = {
      AttentionCase{32, 4, 128, 16, {1, 1, 1, 1}, {1, 100, 1000, 5000}},
      AttentionCase{32, 4, 128, 16, {4, 5}, {65, 161}}, AttentionCase{16, 1, 64, 16, {3}, {97}},
      AttentionCase{4, 2, 32, 16, {3, 2}, {64, 65}},
      AttentionCase{16, 1, 128, 16, {1}, {5000}}};  // 79 ranges of 64 keys
  // One backend at a time: the fence arrivals' outputs first.
  std::vector<std::vector<float>> refs(cases.size());
  const auto by_fences =
      acq_rel ? fence_arrival_outputs(cases, tensor_cores, refs) : std::vector<std::vector<float>>{};
  CudaBackendOptions options = attention_options(tensor_cores);
  options.kernels.attention_arrival_acq_rel = acq_rel;
  Backends b(options);
  std::vector<std::unique_ptr<AttentionRun>> runs;
  for (size_t i = 0; i < cases.size(); ++i)
    runs.push_back(std::make_unique<AttentionRun>(b, cases[i], 40960, &refs[i]));
  for (const auto& run : runs) ASSERT_GT(run->planned_splits(b, tensor_cores), 1) << describe(run->c);
  std::vector<std::vector<float>> first(runs.size());
  for (int round = 0; round < 4; ++round) {
    for (size_t i = 0; i < runs.size(); ++i) {
      b.poison(runs[i]->out.gpu);
      runs[i]->launch_gpu(b);
      const std::string what = "eager launch " + std::to_string(round);
      runs[i]->expect_matches(b, what);
      const auto got = b.floats(runs[i]->out.gpu);
      if (round == 0) {
        first[i] = got;
        if (acq_rel)
          expect_close("acquire-release arrivals against fences, " + describe(runs[i]->c), by_fences[i], got,
                       {0.0f, 0.0f});
      } else
        expect_close(what + " against launch 0, " + describe(runs[i]->c), first[i], got, {0.0f, 0.0f});
    }
  }
  // Back to back in one graph: each attention launch follows the previous one (PDL edges between them).
  auto graph = b.gpu().capture([&] {
    for (const auto& run : runs) run->launch_gpu(b);
  });
  for (int replay = 0; replay < 4; ++replay) {
    for (const auto& run : runs) b.poison(run->out.gpu);
    graph->replay();
    for (size_t i = 0; i < runs.size(); ++i) {
      const std::string what = "graph replay " + std::to_string(replay);
      runs[i]->expect_matches(b, what);
      expect_close(what + " against launch 0, " + describe(runs[i]->c), first[i], b.floats(runs[i]->out.gpu),
                   {0.0f, 0.0f});
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, PagedAttentionSplits,
                         ::testing::Combine(::testing::Bool(), ::testing::Bool()));

INSTANTIATE_TEST_SUITE_P(Prefill, PagedAttentionTest,
                         ::testing::Values(AttentionCase{8, 2, 128, 16, {17, 1, 5}, {17, 40, 5}},
                                           AttentionCase{32, 4, 64, 16, {1, 33, 3}, {100, 33, 70}},
                                           AttentionCase{6, 2, 64, 16, {11}, {50}},
                                           AttentionCase{16, 1, 128, 32, {64, 2}, {64, 300}},
                                           AttentionCase{4, 4, 128, 16, {40}, {40}},
                                           AttentionCase{4, 2, 32, 16, {9, 3}, {20, 3}}));

struct RopeCase {
  int q_heads, kv_heads, head_dim, tokens;
  double theta;
};
void PrintTo(const RopeCase& c, std::ostream* os) {
  *os << "Hq " << c.q_heads << " Hkv " << c.kv_heads << " D " << c.head_dim << " T " << c.tokens << " theta "
      << c.theta;
}

class QkNormRopeKvTest : public ::testing::TestWithParam<RopeCase> {};

TEST_P(QkNormRopeKvTest, MatchesCpu) {
  TPS_REQUIRE_CUDA_DEVICE();
  const RopeCase c = GetParam();
  for (bool early : {true, false}) {  // step inputs and weights read before the PDL wait, or after it
    std::mt19937 rng(c.q_heads * 131 + c.kv_heads * 17 + c.head_dim + c.tokens * 7919 + (early ? 1 : 0));
    CudaBackendOptions options = test_backend_options();
    options.kernels.norm_loads_before_wait = early;
    Backends b(options);
    const int block_size = 16, num_blocks = (c.tokens + block_size - 1) / block_size + 2;
    const int width = (c.q_heads + 2 * c.kv_heads) * c.head_dim;
    auto qkv_v = uniform(rng, size_t(c.tokens) * width, -3.0f, 3.0f);
    auto qn = uniform(rng, c.head_dim, 0.5f, 1.5f), kn = uniform(rng, c.head_dim, 0.5f, 1.5f);
    Pair qkv = b.bf16({c.tokens, width}, qkv_v), q_norm = b.bf16({c.head_dim}, qn),
         k_norm = b.bf16({c.head_dim}, kn);
    std::vector<int32_t> positions(c.tokens), slots(c.tokens);
    std::vector<int32_t> free_slots(size_t(num_blocks) * block_size);
    std::iota(free_slots.begin(), free_slots.end(), 0);
    std::shuffle(free_slots.begin(), free_slots.end(), rng);
    std::uniform_int_distribution<int> pos_dist(0, 262143);
    for (int t = 0; t < c.tokens; ++t) {
      positions[t] = t == 0 ? 0 : pos_dist(rng);
      slots[t] = (t % 5 == 4) ? -1 : free_slots[t];  // every fifth row is padding
    }
    Pair pos = b.i32({c.tokens}, positions), slot = b.i32({c.tokens}, slots);
    const std::vector<int64_t> cache_shape{num_blocks, block_size, c.kv_heads, c.head_dim};
    Pair k_cache = b.output(DType::kBF16, cache_shape), v_cache = b.output(DType::kBF16, cache_shape);
    b.gpu().zero(k_cache.gpu);  // rows not written must match the CPU's zeros
    b.gpu().zero(v_cache.gpu);
    Pair q_out = b.output(DType::kBF16, {c.tokens, c.q_heads * c.head_dim});
    AttentionMeta cm, gm;
    cm.positions = pos.cpu, cm.slot_mapping = slot.cpu;
    gm.positions = pos.gpu, gm.slot_mapping = slot.gpu;
    const RopeConfig rope{c.theta, c.head_dim};
    b.cpu().qk_norm_rope_kv(qkv.cpu, c.q_heads, c.kv_heads, q_norm.cpu, k_norm.cpu, 1e-6f, rope, cm,
                            {k_cache.cpu, v_cache.cpu}, q_out.cpu);
    b.gpu().qk_norm_rope_kv(qkv.gpu, c.q_heads, c.kv_heads, q_norm.gpu, k_norm.gpu, 1e-6f, rope, gm,
                            {k_cache.gpu, v_cache.gpu}, q_out.gpu);
    const Tolerance tol{2e-2f, 1e-2f};
    const std::string what = early ? " (loads before the wait)" : "";
    expect_close("q" + what, cpu_floats(q_out.cpu), b.floats(q_out.gpu), tol);
    expect_close("k cache" + what, cpu_floats(k_cache.cpu), b.floats(k_cache.gpu), tol);
    expect_close("v cache" + what, cpu_floats(v_cache.cpu), b.floats(v_cache.gpu), {0.0f, 0.0f});
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, QkNormRopeKvTest,
                         ::testing::Values(RopeCase{32, 4, 128, 1, 1e6}, RopeCase{32, 4, 128, 16, 1e7},
                                           RopeCase{4, 2, 64, 3, 10000.0}, RopeCase{8, 8, 64, 64, 1e6},
                                           RopeCase{6, 1, 256, 5, 1e6}, RopeCase{4, 2, 32, 7, 1e6},
                                           RopeCase{2, 1, 96, 5, 1e6}));

}  // namespace
}  // namespace tpserve::cuda_test
