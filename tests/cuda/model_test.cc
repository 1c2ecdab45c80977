// The whole Qwen3-MoE forward on the CUDA backend against the CPU backend, on synthetic weights: two
// sequences prefilled together (different lengths), then batched greedy decode steps. Logits must agree
// within a bf16 tolerance, and greedy tokens must agree wherever the CPU's top-2 margin is clear of it
// (both models are fed the CPU's tokens, so one near-tie does not derail the rest).
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <tuple>

#include "kernels/gemv.h"
#include "parallel/communicator.h"
#include "runtime/model/qwen3_moe.h"
#include "runtime/weights/synthetic_weights.h"
#include "tests/cuda/op_test_util.h"

namespace tpserve::cuda_test {
namespace {

constexpr int kBlockSize = 16, kMaxBlocks = 8;

struct Sequence {
  std::vector<int32_t> tokens;  // prompt, then generated
  int cached = 0;               // tokens in the KV cache
  int first_block = 0;          // blocks [first_block, first_block + kMaxBlocks) belong to it
};

// One step: every sequence feeds its uncached tokens and samples greedily after its last one.
StepBatch make_step(std::vector<Sequence>& seqs) {
  StepBatch b;
  b.max_blocks_per_seq = kMaxBlocks;
  b.query_start.push_back(0);
  for (auto& s : seqs) {
    for (int pos = s.cached; pos < static_cast<int>(s.tokens.size()); ++pos) {
      b.token_ids.push_back(s.tokens[pos]);
      b.positions.push_back(pos);
      b.slot_mapping.push_back((s.first_block + pos / kBlockSize) * kBlockSize + pos % kBlockSize);
    }
    b.query_start.push_back(b.num_tokens());
    b.context_lens.push_back(static_cast<int32_t>(s.tokens.size()));
    for (int i = 0; i < kMaxBlocks; ++i) b.block_tables.push_back(s.first_block + i);
    b.sample_rows.push_back(b.num_tokens() - 1);
    b.sampling.push_back(SamplingParams{});  // greedy
    b.sample_counters.push_back(static_cast<int64_t>(s.tokens.size()));
    s.cached = static_cast<int>(s.tokens.size());
  }
  return b;
}

// Room for the tests' two sequences (blocks [0, kMaxBlocks) and [kMaxBlocks, 2 kMaxBlocks)), logits kept.
ModelOptions two_sequence_options() {
  ModelOptions options;
  options.max_tokens = 64;
  options.max_seqs = 2;
  options.max_samples = 2;
  options.max_blocks_per_seq = kMaxBlocks;
  options.num_kv_blocks = 2 * kMaxBlocks;
  options.kv_block_size = kBlockSize;
  options.sampling_candidates = 64;
  options.keep_logits = true;
  return options;
}

// Two sequences with random prompts of len0 and len1 tokens (the second's blocks after the first's).
std::vector<Sequence> random_prompts(int vocab, unsigned seed, int len0, int len1) {
  std::vector<Sequence> seqs(2);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> token(0, vocab - 1);
  for (int i = 0; i < len0; ++i) seqs[0].tokens.push_back(token(rng));
  for (int i = 0; i < len1; ++i) seqs[1].tokens.push_back(token(rng));
  seqs[1].first_block = kMaxBlocks;
  return seqs;
}

// Model preset; gate_up_bulk: runtime.moe_gate_up_bulk_min_tokens 1 (every MoE launch; the small preset,
// H = 256, takes it), else 0 (the register kernel).
class CudaModelTest : public ::testing::TestWithParam<std::tuple<std::string, bool>> {};

TEST_P(CudaModelTest, GreedyDecodeMatchesCpu) {
  TPS_REQUIRE_CUDA_DEVICE();
  const auto& [preset, gate_up_bulk] = GetParam();
  const ModelSpec spec = preset_model_spec(preset, /*layers=*/2, /*vocab=*/8192);
  const SyntheticWeights weights(spec, 7);
  const ShardLayout layout;
  const ModelOptions options = two_sequence_options();
  CudaBackendOptions backend_options = test_backend_options();
  backend_options.kernels.moe_gate_up_bulk_min_tokens = gate_up_bulk ? 1 : 0;
  Backends b(backend_options);
  auto comm = parallel::make_single_rank_communicator();
  Qwen3MoeModel cpu(spec, layout, load_model_weights(spec, layout, weights, b.cpu(), false), options, b.cpu(),
                    *comm);
  Qwen3MoeModel gpu(spec, layout, load_model_weights(spec, layout, weights, b.gpu(), false), options, b.gpu(),
                    *comm);

  std::vector<Sequence> seqs = random_prompts(spec.vocab_size, 5, 21, 5);

  int compared = 0;
  for (int step = 0; step < 10; ++step) {
    const StepBatch batch = make_step(seqs);
    const StepResult ref = cpu.forward(batch, true);
    const StepResult got = gpu.forward(batch, true);
    const float scale = rms(ref.logits);
    expect_close("logits, step " + std::to_string(step), ref.logits, got.logits, {0.05f * scale, 0.05f});
    for (size_t r = 0; r < ref.tokens.size(); ++r) {
      const auto row = ref.logits.begin() + static_cast<int64_t>(r) * spec.vocab_size;
      std::vector<float> sorted(row, row + spec.vocab_size);
      std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<float>());
      if (sorted[0] - sorted[1] > 0.1f * scale) {
        EXPECT_EQ(ref.tokens[r], got.tokens[r]) << "step " << step << " row " << r;
        ++compared;
      }
      seqs[r].tokens.push_back(ref.tokens[r]);  // teacher forcing with the CPU's token
    }
  }
  EXPECT_GE(compared, 5) << "too few clear-margin tokens to compare";
}

// Two backends that differ only in a switch that must not change a result: the same logits to the bit and
// the same tokens over a prefill and 5 decode steps of two sequences, or of the second alone with
// one_sequence (the "small" preset, 2 layers; the prefill's 26 rows take cuBLASLt either way). `staged`: a
// GEMV shape the switch concerns, which must take the staged kernel, the only one these switches change;
// `after`, if given, checks the two backends at the end.
void expect_same_logits(const CudaBackendOptions& plain_options, const CudaBackendOptions& changed_options,
                        unsigned seed, const std::function<kernels::GemvParams(const ModelSpec&)>& staged,
                        const std::function<void(CudaBackend&, CudaBackend&)>& after = nullptr,
                        bool one_sequence = false) {
  const ModelSpec spec = preset_model_spec("small", /*layers=*/2, /*vocab=*/8192);
  const SyntheticWeights weights(spec, seed);
  const ShardLayout layout;
  const ModelOptions options = two_sequence_options();
  Backends plain_backends(plain_options), changed_backends(changed_options);
  kernels::GemvStagedPlan plan;
  ASSERT_TRUE(kernels::plan_gemv_staged(staged(spec), changed_backends.gpu().gemv_launch_options(), plan))
      << "the GEMV the switch concerns must take the staged kernel";
  auto comm = parallel::make_single_rank_communicator();
  Qwen3MoeModel plain(spec, layout, load_model_weights(spec, layout, weights, plain_backends.gpu(), false),
                      options, plain_backends.gpu(), *comm);
  Qwen3MoeModel changed(spec, layout,
                        load_model_weights(spec, layout, weights, changed_backends.gpu(), false), options,
                        changed_backends.gpu(), *comm);

  std::vector<Sequence> seqs = random_prompts(spec.vocab_size, seed + 1, 9, 17);
  if (one_sequence) seqs.erase(seqs.begin());  // the 17-token one: one-token decode steps
  for (int step = 0; step < 6; ++step) {
    const StepBatch batch = make_step(seqs);
    const StepResult a = plain.forward(batch, true), b = changed.forward(batch, true);
    ASSERT_EQ(a.logits.size(), b.logits.size());
    size_t differing = 0;
    for (size_t i = 0; i < a.logits.size(); ++i) differing += a.logits[i] != b.logits[i];
    EXPECT_EQ(differing, 0u) << "step " << step << ": logits differing of " << a.logits.size();
    EXPECT_EQ(a.tokens, b.tokens) << "step " << step;
    for (size_t r = 0; r < a.tokens.size(); ++r) seqs[r].tokens.push_back(a.tokens[r]);
  }
  if (after) after(plain_backends.gpu(), changed_backends.gpu());
}

// runtime.attention_next_gemv_copy_groups only orders the O projection's weight copies.
TEST(CudaModelSwitchTest, AttentionNextGemvCopyGroupsKeepsLogits) {
  TPS_REQUIRE_CUDA_DEVICE();
  CudaBackendOptions plain = test_backend_options(), throttled = test_backend_options();
  plain.kernels.attention_next_gemv_copy_groups = 0;
  throttled.kernels.attention_next_gemv_copy_groups = 4;
  throttled.kernels.attention_next_gemv_max_rows = 16;  // the two sequences' decode steps too
  expect_same_logits(plain, throttled, 2, [](const ModelSpec& spec) {
    kernels::GemvParams o_proj;  // the decode steps' O projection: 2 rows
    o_proj.m = 2, o_proj.n = spec.hidden_size, o_proj.k = spec.q_size();
    return o_proj;
  });
}

// runtime.norm_next_gemv_trigger_early_max_rows: the QKV projection lets decode attention start (and read its
// step inputs, K/V tiles and norm weights) while the norm before it still runs; only the overlap changes.
TEST(CudaModelSwitchTest, NormNextGemvEarlyTriggerKeepsLogits) {
  TPS_REQUIRE_CUDA_DEVICE();
  CudaBackendOptions plain = test_backend_options(), early = test_backend_options();
  plain.kernels.norm_next_gemv_trigger_early_max_rows = 0;
  early.kernels.norm_next_gemv_trigger_early_max_rows = 16;
  expect_same_logits(
      plain, early, 12,
      [](const ModelSpec& spec) {
        kernels::GemvParams qkv;  // the decode steps' QKV projection: 2 rows
        qkv.m = 2, qkv.n = spec.q_size() + 2 * spec.kv_size(), qkv.k = spec.hidden_size;
        return qkv;
      },
      [](CudaBackend& plain_gpu, CudaBackend& early_gpu) {
        EXPECT_EQ(plain_gpu.gemv_early_trigger_launches(), 0u);
        // At least the 5 decode steps' QKV projections of both layers.
        EXPECT_GE(early_gpu.gemv_early_trigger_launches(), 10u)
            << "the switch did not reach the QKV projection";
      });
}

// runtime.attention_merge_in_o_max_ranges: one sequence of 17-22 keys in ranges of 16 (two ranges), whose
// decode steps' O projections merge attention's partials themselves; the same bits as attention merging them.
TEST(CudaModelSwitchTest, AttentionMergeInOKeepsLogits) {
  TPS_REQUIRE_CUDA_DEVICE();
  CudaBackendOptions plain = test_backend_options(), merge_in_o = test_backend_options();
  plain.kernels.attention_split_keys = merge_in_o.kernels.attention_split_keys = 16;
  plain.kernels.attention_split_min_keys = merge_in_o.kernels.attention_split_min_keys = 0;
  plain.kernels.attention_merge_in_o_max_ranges = 0;
  merge_in_o.kernels.attention_merge_in_o_max_ranges = 4;
  expect_same_logits(
      plain, merge_in_o, 31,
      [](const ModelSpec& spec) {
        kernels::GemvParams o_proj;  // the decode steps' O projection: 1 row
        o_proj.m = 1, o_proj.n = spec.hidden_size, o_proj.k = spec.q_size();
        return o_proj;
      },
      [](CudaBackend& plain_gpu, CudaBackend& merging_gpu) {
        EXPECT_EQ(plain_gpu.gemv_attention_merge_launches(), 0u);
        // The 5 decode steps' O projections of both layers (the prefill's 17 rows take the two ops).
        EXPECT_EQ(merging_gpu.gemv_attention_merge_launches(), 10u);
      },
      /*one_sequence=*/true);
}

// tiny: head_dim 32, 8 experts top-2; small: head_dim 64, 16 experts top-4.
INSTANTIATE_TEST_SUITE_P(Presets, CudaModelTest,
                         ::testing::Combine(::testing::Values("tiny", "small"), ::testing::Bool()));

}  // namespace
}  // namespace tpserve::cuda_test
