// CUDA sampling against the CPU reference: per-rank candidates (exact top-C with ties to the smaller id, and
// the [max, sum exp] statistics), and the merge + filters + Gumbel-max draw, which must give the same tokens.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
#include <utility>

#include "tests/cuda/op_test_util.h"

namespace tpserve::cuda_test {
namespace {

// Logits with many exact ties: random values quantised to steps of 1/32.
std::vector<float> tied_logits(std::mt19937& rng, size_t n) {
  auto v = uniform(rng, n, -8.0f, 8.0f);
  for (auto& x : v) x = std::round(x * 32.0f) / 32.0f;
  return v;
}

struct CandidatesCase {
  int rows, vocab, candidates;
};
void PrintTo(const CandidatesCase& c, std::ostream* os) {
  *os << "S " << c.rows << " V " << c.vocab << " C " << c.candidates;
}

class SamplingCandidatesTest : public ::testing::TestWithParam<CandidatesCase> {};

TEST_P(SamplingCandidatesTest, MatchesCpu) {
  TPS_REQUIRE_CUDA_DEVICE();
  const CandidatesCase c = GetParam();
  std::mt19937 rng(c.rows * 31 + c.vocab * 7 + c.candidates);
  Backends b;
  const int64_t vocab_begin = 1000;
  Pair logits = b.f32({c.rows, c.vocab}, tied_logits(rng, size_t(c.rows) * c.vocab));
  std::vector<float> temps(c.rows);
  // Greedy rows: the best candidate in every place, and statistics with T = 1.
  for (int r = 0; r < c.rows; ++r) temps[r] = r % 2 == 0 ? 0.0f : 0.7f;
  Pair temp = b.f32({c.rows}, temps);
  Pair values = b.output(DType::kF32, {c.rows, c.candidates}),
       ids = b.output(DType::kI32, {c.rows, c.candidates});
  Pair stats = b.output(DType::kF32, {c.rows, 2});
  b.cpu().sampling_candidates(logits.cpu, vocab_begin, temp.cpu, values.cpu, ids.cpu, stats.cpu);
  b.gpu().sampling_candidates(logits.gpu, vocab_begin, temp.gpu, values.gpu, ids.gpu, stats.gpu);
  expect_close("candidate values", cpu_floats(values.cpu), b.floats(values.gpu), {0.0f, 0.0f});
  expect_equal("candidate ids", cpu_ints(ids.cpu), b.ints(ids.gpu));
  expect_close("stats", cpu_floats(stats.cpu), b.floats(stats.gpu), {0.0f, 1e-4f});
}

INSTANTIATE_TEST_SUITE_P(Shapes, SamplingCandidatesTest,
                         ::testing::Values(CandidatesCase{1, 1000, 1}, CandidatesCase{3, 1000, 17},
                                           CandidatesCase{4, 37984, 256}, CandidatesCase{2, 151936, 256},
                                           CandidatesCase{2, 20000, 4096}, CandidatesCase{1, 4096, 4096},
                                           CandidatesCase{5, 300, 64}));

// Logit bias / penalties / min_tokens applied in place: this rank's slice only, distinct (row, token) pairs
// in random order, -inf biases and negative logits among them.
TEST(LogitAdjust, MatchesCpu) {
  TPS_REQUIRE_CUDA_DEVICE();
  for (const auto& [rows, vocab] : {std::pair{1, 1000}, std::pair{5, 37984}, std::pair{16, 151936}}) {
    std::mt19937 rng(rows * 131 + vocab);
    Backends b;
    const int64_t vocab_begin = 500;  // entries below it or past the slice belong to other ranks
    std::vector<int32_t> targets;
    std::vector<float> values;
    std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(vocab_begin + vocab + 300));
    std::uniform_real_distribution<float> unit(0.0f, 1.0f);
    for (int r = 0; r < rows; ++r) {
      std::set<int32_t> chosen;
      while (chosen.size() < 300) chosen.insert(token(rng));
      for (int32_t t : chosen) {
        targets.insert(targets.end(), {r, t});
        const float bias = unit(rng) < 0.1f ? -INFINITY : 20.0f * unit(rng) - 10.0f;
        values.insert(values.end(),
                      {bias, 0.5f + 1.5f * unit(rng), unit(rng) < 0.5f ? 0.0f : 3.0f * unit(rng)});
      }
    }
    // Shuffle whole entries: the kernel's threads meet them in any order.
    const int n = static_cast<int>(targets.size() / 2);
    std::vector<int> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<int32_t> t2;
    std::vector<float> v3;
    for (int i : order) {
      t2.insert(t2.end(), {targets[2 * i], targets[2 * i + 1]});
      v3.insert(v3.end(), {values[3 * i], values[3 * i + 1], values[3 * i + 2]});
    }
    Pair logits = b.f32({rows, vocab}, uniform(rng, size_t(rows) * vocab, -8.0f, 8.0f));
    Pair t = b.i32({n, 2}, t2), v = b.f32({n, 3}, v3);
    b.cpu().adjust_logits(logits.cpu, vocab_begin, t.cpu, v.cpu);
    b.gpu().adjust_logits(logits.gpu, vocab_begin, t.gpu, v.gpu);
    expect_close("adjusted logits V " + std::to_string(vocab), cpu_floats(logits.cpu), b.floats(logits.gpu),
                 {1e-6f, 1e-6f});
  }
}

// Token masks applied in place: random masks over the whole vocabulary, this rank's slice starting inside a
// word, some rows masked and others not.
TEST(LogitMask, MatchesCpu) {
  TPS_REQUIRE_CUDA_DEVICE();
  for (const auto& [rows, vocab] : {std::pair{1, 1000}, std::pair{5, 37984}, std::pair{16, 151936}}) {
    std::mt19937 rng(rows * 17 + vocab);
    Backends b;
    const int64_t vocab_begin = 45;  // not a multiple of 32
    const int words = static_cast<int>((vocab_begin + vocab + 31) / 32);
    std::vector<int32_t> mask_rows;
    for (int r = 0; r < rows; ++r)
      if (r % 3 != 1) mask_rows.push_back(r);
    std::shuffle(mask_rows.begin(), mask_rows.end(), rng);
    const int n = static_cast<int>(mask_rows.size());
    std::vector<int32_t> masks(size_t(n) * words);
    std::uniform_int_distribution<uint32_t> bits;
    for (auto& w : masks) w = static_cast<int32_t>(bits(rng) & bits(rng));  // about a quarter allowed
    Pair logits = b.f32({rows, vocab}, uniform(rng, size_t(rows) * vocab, -8.0f, 8.0f));
    Pair r = b.i32({n}, mask_rows), m = b.i32({n, words}, masks);
    b.cpu().mask_logits(logits.cpu, vocab_begin, r.cpu, m.cpu);
    b.gpu().mask_logits(logits.gpu, vocab_begin, r.gpu, m.gpu);
    expect_close("masked logits V " + std::to_string(vocab), cpu_floats(logits.cpu), b.floats(logits.gpu),
                 {0.0f, 0.0f});
  }
}

struct SampleCase {
  int ranks, candidates;
};
void PrintTo(const SampleCase& c, std::ostream* os) {
  *os << "R " << c.ranks << " C " << c.candidates;
}

class SampleTest : public ::testing::TestWithParam<SampleCase> {};

TEST_P(SampleTest, SameTokensAsCpu) {
  TPS_REQUIRE_CUDA_DEVICE();
  const SampleCase c = GetParam();
  std::mt19937 rng(c.ranks * 101 + c.candidates);
  Backends b;
  const int vocab_per_rank = 5000, rows = 12;
  // Per-rank candidates from the CPU reference (sorted, distinct ids), gathered as [R, S, C].
  std::vector<float> all_values, all_stats;
  std::vector<int32_t> all_ids;
  std::vector<float> temps(rows), top_p(rows), min_p(rows);
  std::vector<int32_t> top_k(rows);
  std::vector<int64_t> seeds(rows), counters(rows);
  const float temp_choices[] = {0.0f, 1.0f, 0.7f, 1.3f};
  for (int r = 0; r < rows; ++r) {
    temps[r] = temp_choices[r % 4];
    top_k[r] = r % 3 == 1 ? 5 : 0;
    top_p[r] = r % 5 == 2 ? 0.9f : (r % 5 == 4 ? 0.5f : 1.0f);
    min_p[r] = r % 6 == 3 ? 0.1f : 0.0f;
    seeds[r] = 1234 + r * 977;
    counters[r] = r * 3;
  }
  Pair temp = b.f32({rows}, temps);
  for (int rank = 0; rank < c.ranks; ++rank) {
    auto logits = b.cpu().alloc(DType::kF32, {rows, vocab_per_rank});
    auto lv = tied_logits(rng, size_t(rows) * vocab_per_rank);
    b.cpu().copy_from_host(logits, lv.data());
    auto v = b.cpu().alloc(DType::kF32, {rows, c.candidates});
    auto i = b.cpu().alloc(DType::kI32, {rows, c.candidates});
    auto s = b.cpu().alloc(DType::kF32, {rows, 2});
    b.cpu().sampling_candidates(logits, int64_t(rank) * vocab_per_rank, temp.cpu, v, i, s);
    const auto fv = cpu_floats(v), fs = cpu_floats(s);
    const auto iv = cpu_ints(i);
    all_values.insert(all_values.end(), fv.begin(), fv.end());
    all_ids.insert(all_ids.end(), iv.begin(), iv.end());
    all_stats.insert(all_stats.end(), fs.begin(), fs.end());
  }
  Pair values = b.f32({c.ranks, rows, c.candidates}, all_values);
  Pair ids = b.i32({c.ranks, rows, c.candidates}, all_ids);
  Pair stats = b.f32({c.ranks, rows, 2}, all_stats);
  Pair tk = b.i32({rows}, top_k), tp = b.f32({rows}, top_p), mp = b.f32({rows}, min_p);
  for (int round = 0; round < 4; ++round) {
    for (auto& counter : counters) counter += 1;
    Pair seed = b.i64({rows}, seeds), counter = b.i64({rows}, counters);
    SamplingInputs cpu_in{temp.cpu, tk.cpu, tp.cpu, mp.cpu, seed.cpu, counter.cpu};
    SamplingInputs gpu_in{temp.gpu, tk.gpu, tp.gpu, mp.gpu, seed.gpu, counter.gpu};
    Pair tokens = b.output(DType::kI32, {rows});
    b.cpu().sample(values.cpu, ids.cpu, stats.cpu, cpu_in, tokens.cpu);
    b.gpu().sample(values.gpu, ids.gpu, stats.gpu, gpu_in, tokens.gpu);
    expect_equal("tokens, round " + std::to_string(round), cpu_ints(tokens.cpu), b.ints(tokens.gpu));
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, SampleTest,
                         ::testing::Values(SampleCase{1, 16}, SampleCase{2, 256}, SampleCase{4, 64},
                                           SampleCase{1, 4096}, SampleCase{3, 1}));

}  // namespace
}  // namespace tpserve::cuda_test
