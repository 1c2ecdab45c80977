// CUDA backend memory: copies through the pinned staging buffers (larger than one buffer too), zeroed
// allocations, a full arena reported by name, and no allocation at all once set up: a decode-like sequence
// of ops repeated after a warm-up leaves the allocation counter (and the device's free memory) unchanged.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>

#include "common/cuda_check.h"
#include "runtime/backend/cuda/device_memory.h"
#include "tests/cuda/op_test_util.h"

namespace tpserve::cuda_test {
namespace {

// Bad options fail before the backend touches a device (so this runs without a GPU too).
TEST(CudaBackendOptions, AttentionSplitKeysMustBeAMultipleOf16) {
  for (int keys : {0, 8, 40}) {
    CudaBackendOptions options;
    options.kernels.attention_split_keys = keys;
    try {
      make_cuda_backend(options);
      ADD_FAILURE() << keys << " keys accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("attention_split_keys"), std::string::npos) << e.what();
    }
  }
}

TEST(CudaBackendMemory, CopiesRoundTripThroughStaging) {
  TPS_REQUIRE_CUDA_DEVICE();
  Backends b;  // 8 MiB staging buffers
  for (int64_t n : {int64_t(1), int64_t(1000), int64_t(5) << 20, int64_t(9) << 20}) {  // up to 36 MiB of i32
    std::vector<int32_t> src(n), back(n, -7);
    std::iota(src.begin(), src.end(), 3);
    Tensor t = b.gpu().alloc(DType::kI32, {n});
    b.gpu().copy_from_host(t, src.data());
    b.gpu().copy_to_host(back.data(), t);
    EXPECT_EQ(src, back) << n << " elements";
  }
}

TEST(CudaBackendMemory, AllocationsAreZeroedAndFromTheArena) {
  TPS_REQUIRE_CUDA_DEVICE();
  Backends b(size_t(64) << 20, size_t(8) << 20);
  const auto before = cuda_allocation_stats();
  Tensor t = b.gpu().alloc(DType::kF32, {1000});
  EXPECT_EQ(cuda_allocation_stats().count, before.count);
  std::vector<float> host(1000, 1.0f);
  b.gpu().copy_to_host(host.data(), t);
  EXPECT_EQ(host, std::vector<float>(1000, 0.0f));
  const size_t free_before = *b.gpu().memory_left();
  b.gpu().alloc(DType::kBF16, {4096});
  EXPECT_EQ(free_before - *b.gpu().memory_left(), 8192u);
  try {
    b.gpu().alloc(DType::kF32, {int64_t(1) << 30});
    FAIL() << "a 4 GiB allocation fit in a 64 MiB arena";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("device arena full"), std::string::npos) << e.what();
  }
}

TEST(CudaBackendMemory, StepsAllocateNothing) {
  TPS_REQUIRE_CUDA_DEVICE();
  std::mt19937 rng(99);
  Backends b;
  CudaBackend& g = b.gpu();
  const int hidden = 256, heads = 4, kv_heads = 2, d = 64, experts = 16, k = 4, inter = 64, vocab = 5000;
  const int seqs = 2, block_size = 16, blocks = 64, max_blocks = 32, candidates = 64;
  auto fill = [&](DType dtype, std::vector<int64_t> shape, float lo, float hi) {
    Tensor t = alloc(g, dtype, shape);
    std::vector<float> v = uniform(rng, size_t(t.numel()), lo, hi);
    if (dtype == DType::kF32) {
      g.copy_from_host(t, v.data());
    } else {
      std::vector<uint16_t> bits(v.size());
      for (size_t i = 0; i < v.size(); ++i) bits[i] = f32_to_bf16(v[i]);
      g.copy_from_host(t, bits.data());
    }
    return t;
  };
  auto ints = [&](std::vector<int64_t> shape, std::vector<int32_t> v) {
    Tensor t = alloc(g, DType::kI32, shape);
    g.copy_from_host(t, v.data());
    return t;
  };
  Tensor embed = fill(DType::kBF16, {vocab, hidden}, -1, 1),
         norm_w = fill(DType::kBF16, {hidden}, 0.5f, 1.5f);
  Tensor qkv_w = fill(DType::kBF16, {(heads + 2 * kv_heads) * d, hidden}, -0.1f, 0.1f);
  Tensor o_w = fill(DType::kBF16, {hidden, heads * d}, -0.1f, 0.1f),
         router = fill(DType::kBF16, {experts, hidden}, -0.1f, 0.1f);
  Tensor gate_up = fill(DType::kBF16, {experts, 2 * inter, hidden}, -0.1f, 0.1f);
  Tensor down = fill(DType::kBF16, {experts, hidden, inter}, -0.1f, 0.1f),
         qn = fill(DType::kBF16, {d}, 0.5f, 1.5f);
  KvCacheLayer cache{fill(DType::kBF16, {blocks, block_size, kv_heads, d}, -1, 1),
                     fill(DType::kBF16, {blocks, block_size, kv_heads, d}, -1, 1)};
  std::vector<int32_t> table(seqs * max_blocks);
  std::iota(table.begin(), table.end(), 0);
  AttentionMeta meta;
  meta.positions = ints({seqs}, {300, 41});
  meta.slot_mapping = ints({seqs}, {300, 32 * 16 + 41});
  meta.query_start = ints({seqs + 1}, {0, 1, 2});
  meta.context_lens = ints({seqs}, {301, 42});
  meta.block_tables = ints({seqs, max_blocks}, table);
  meta.num_seqs = seqs, meta.max_query_len = 1, meta.max_context_len = 301;
  Tensor ids = ints({seqs}, {5, 4000}), residual = alloc(g, DType::kBF16, {seqs, hidden});
  Tensor normed = alloc(g, DType::kBF16, {seqs, hidden}),
         qkv = alloc(g, DType::kBF16, {seqs, (heads + 2 * kv_heads) * d});
  Tensor q = alloc(g, DType::kBF16, {seqs, heads * d}), attn = alloc(g, DType::kBF16, {seqs, heads * d});
  Tensor proj = alloc(g, DType::kBF16, {seqs, hidden}), logits = alloc(g, DType::kF32, {seqs, experts});
  Tensor topk_w = alloc(g, DType::kF32, {seqs, k}), topk_ids = alloc(g, DType::kI32, {seqs, k});
  Tensor vocab_logits = alloc(g, DType::kF32, {seqs, vocab}),
         values = alloc(g, DType::kF32, {1, seqs, candidates});
  Tensor cand_ids = alloc(g, DType::kI32, {1, seqs, candidates}), stats = alloc(g, DType::kF32, {1, seqs, 2});
  Tensor temp = fill(DType::kF32, {seqs}, 0.5f, 1.0f), tokens = alloc(g, DType::kI32, {seqs});
  SamplingInputs sp{temp,
                    ints({seqs}, {0, 3}),
                    fill(DType::kF32, {seqs}, 0.8f, 0.9f),
                    alloc(g, DType::kF32, {seqs}),
                    alloc(g, DType::kI64, {seqs}),
                    alloc(g, DType::kI64, {seqs})};
  Tensor big_x = fill(DType::kBF16, {40, hidden}, -1, 1), big_out = alloc(g, DType::kBF16, {40, heads * d});

  auto step = [&] {
    g.embedding(ids, embed, 0, residual);
    g.rmsnorm(residual, norm_w, 1e-6f, normed);
    g.linear(normed, qkv_w, qkv);
    g.qk_norm_rope_kv(qkv, heads, kv_heads, qn, qn, 1e-6f, {1e6, d}, meta, cache, q);
    g.attention(q, heads, kv_heads, 0.125f, cache, meta, attn);
    g.linear(attn, o_w, proj);
    g.add_rmsnorm(residual, proj, norm_w, 1e-6f, normed);
    g.linear(normed, router, logits);
    g.topk_gating(logits, k, true, topk_w, topk_ids);
    g.moe_experts(normed, gate_up, down, topk_ids, topk_w, 0, proj);
    g.linear(big_x, o_w.view({heads * d, hidden}), big_out);  // cuBLASLt path
    g.linear(normed, embed, vocab_logits);
    g.sampling_candidates(vocab_logits, 0, temp, values.view({seqs, candidates}),
                          cand_ids.view({seqs, candidates}), stats.view({seqs, 2}));
    g.sample(values, cand_ids, stats, sp, tokens);
    std::vector<int32_t> out(seqs);
    g.copy_to_host(out.data(), tokens);
  };
  step();  // warm-up: module loading, cuBLASLt plans
  size_t free_before = 0, total = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_before, &total));
  const auto before = cuda_allocation_stats();
  const size_t arena_used = g.allocated_bytes();
  for (int i = 0; i < 5; ++i) step();
  size_t free_after = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_after, &total));
  EXPECT_EQ(cuda_allocation_stats().count, before.count);
  EXPECT_EQ(cuda_allocation_stats().bytes, before.bytes);
  EXPECT_EQ(g.allocated_bytes(), arena_used);
  EXPECT_EQ(free_after, free_before) << "device memory changed during steps (another process on the GPU?)";
}

}  // namespace
}  // namespace tpserve::cuda_test
