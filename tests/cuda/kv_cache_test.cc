// The KV cache sized from the CUDA arena (runtime.num_kv_blocks: 0): it fills what weights and workspace
// left (less the reserve), never beyond max_batch sequences of max_seq_len, and a cache that cannot hold
// one max_seq_len sequence is a clear error. The engine's scheduler gets the same count and decodes.
#include <gtest/gtest.h>

#include "common/error.h"
#include "parallel/communicator.h"
#include "runtime/backend/cuda/cuda_backend.h"
#include "runtime/config/config_parser.h"
#include "runtime/engine/engine.h"
#include "tests/cuda/op_test_util.h"

namespace tpserve::cuda_test {
namespace {

constexpr size_t kMiB = size_t(1) << 20;

std::unique_ptr<Engine> tiny_engine(parallel::Communicator& comm, size_t arena_bytes, int max_batch,
                                    int max_seq_len) {
  const Config config = parse_config(
      "model: {synthetic: {preset: tiny, seed: 2, vocab: 4096}}\n"
      "runtime: {backend: cuda, kv_block_size: 16, num_kv_blocks: 0}\n"
      "cuda_graph: {enabled: false}\n",
      "kv_cache_test",
      {"runtime.max_batch=" + std::to_string(max_batch),
       "runtime.max_seq_len=" + std::to_string(max_seq_len)});
  CudaBackendOptions o;
  o.arena_bytes = arena_bytes;
  return std::make_unique<Engine>(config, comm, make_cuda_backend(o));
}

TEST(CudaKvCache, FillsTheArenaLeftUpToTheCap) {
  TPS_REQUIRE_CUDA_DEVICE();
  auto comm = parallel::make_single_rank_communicator();
  // 8 sequences of 256k tokens would need 1 GiB of KV (tiny: 8 KiB a block); the arena has 512 MiB.
  auto engine = tiny_engine(*comm, 512 * kMiB, 8, 262144);
  const int per_seq = 262144 / 16, blocks = engine->model().options().num_kv_blocks;
  EXPECT_GE(blocks, per_seq);
  EXPECT_LT(blocks, 8 * per_seq);
  const size_t per_block = engine->model().kv_cache_bytes() / static_cast<size_t>(blocks + 1);
  EXPECT_EQ(per_block, size_t(2) * 2 * 16 * 2 * 32 * 2);  // K and V, 2 layers, 16 tokens, 2 heads x 32, bf16
  const std::optional<size_t> left = engine->backend().memory_left();
  ASSERT_TRUE(left.has_value());
  EXPECT_LT(*left, 33 * kMiB + 2 * per_block) << "the cache should take what is left beyond the reserve";
  EXPECT_EQ(engine->generate({5, 6, 7}, SamplingParams{}, 8, true).size(), 8u);

  // Plenty of memory: exactly max_batch sequences of max_seq_len.
  engine.reset();
  engine = tiny_engine(*comm, 512 * kMiB, 4, 256);
  EXPECT_EQ(engine->model().options().num_kv_blocks, 4 * (256 / 16));
}

TEST(CudaKvCache, NoRoomForOneSequenceIsAClearError) {
  TPS_REQUIRE_CUDA_DEVICE();
  auto comm = parallel::make_single_rank_communicator();
  try {
    tiny_engine(*comm, 512 * kMiB, 1, 1 << 22);  // one 4M-token sequence: 2 GiB of KV
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("runtime.max_seq_len"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tpserve::cuda_test
