// KV-cache sizing: a fixed count, a count from the memory left (capped, with the reserve and the padding
// block taken off), no budget (host memory: the cap), and the errors that name what to change.
#include <gtest/gtest.h>

#include <limits>

#include "common/error.h"
#include "runtime/model/kv_cache_sizing.h"

namespace tpserve {
namespace {

KvCacheSizing sizing(int requested) {
  return KvCacheSizing{.bytes_per_block = 1000,
                       .requested = requested,
                       .cap = 64,
                       .min_blocks = 8,
                       .reserve_bytes = 500,
                       .extra_blocks = 1};
}

TEST(KvCacheSizing, FromMemoryLeftCappedAndWithoutReserveAndPadding) {
  // 20.5 blocks' worth, 500 bytes reserved: 20 blocks fit, one is the padding block.
  EXPECT_EQ(kv_blocks_to_allocate(sizing(0), 20'500), 19);
  EXPECT_EQ(kv_blocks_to_allocate(sizing(0), 20'499), 18);
  EXPECT_EQ(kv_blocks_to_allocate(sizing(0), 1'000'000), 64);     // never more than max_batch sequences use
  EXPECT_EQ(kv_blocks_to_allocate(sizing(0), std::nullopt), 64);  // no budget: the cap
  EXPECT_EQ(kv_blocks_to_allocate(sizing(0), 9'500), 8);          // exactly one max_seq_len sequence
}

TEST(KvCacheSizing, TooLittleMemoryForOneSequenceNamesTheSettings) {
  try {
    kv_blocks_to_allocate(sizing(0), 9'499);
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("7 blocks"), std::string::npos) << what;
    EXPECT_NE(what.find("needs 8"), std::string::npos) << what;
    EXPECT_NE(what.find("runtime.max_seq_len"), std::string::npos) << what;
    EXPECT_NE(what.find("runtime.gpu_memory_fraction"), std::string::npos) << what;
  }
  EXPECT_THROW(kv_blocks_to_allocate(sizing(0), 0), Error);
}

TEST(KvCacheSizing, ARequestedCountIsKeptOrRefusedWhenItCannotFit) {
  EXPECT_EQ(kv_blocks_to_allocate(sizing(5), std::nullopt), 5);
  EXPECT_EQ(kv_blocks_to_allocate(sizing(5), 6'000), 5);          // 5 + the padding block, no reserve
  EXPECT_EQ(kv_blocks_to_allocate(sizing(100), 1'000'000), 100);  // above the cap when asked for
  try {
    kv_blocks_to_allocate(sizing(5), 5'999);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("runtime.num_kv_blocks=5"), std::string::npos) << e.what();
  }
}

// Host memory (no backend budget): the cap, or the requested count, with its padding block must fit in what
// the host has available; else the error names the settings.
TEST(KvCacheSizing, HostMemoryTooSmallForTheCacheNamesTheSettings) {
  KvCacheSizing s = sizing(0);
  s.host_available = 65'000;  // the cap's 64 blocks and the padding block
  EXPECT_EQ(kv_blocks_to_allocate(s, std::nullopt), 64);
  s.host_available = 64'999;
  try {
    kv_blocks_to_allocate(s, std::nullopt);
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("64 blocks (runtime.max_batch x runtime.max_seq_len)"), std::string::npos) << what;
    EXPECT_NE(what.find("of host memory"), std::string::npos) << what;
  }
  s = sizing(5);
  s.host_available = 5'999;
  try {
    kv_blocks_to_allocate(s, std::nullopt);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("5 blocks (runtime.num_kv_blocks)"), std::string::npos) << e.what();
  }
  s.host_available = 6'000;
  EXPECT_EQ(kv_blocks_to_allocate(s, std::nullopt), 5);
  s.host_available = 1;  // a backend budget decides instead
  EXPECT_EQ(kv_blocks_to_allocate(s, 1'000'000), 5);
}

TEST(KvCacheSizing, TheCapDoesNotOverflow) {
  EXPECT_EQ(kv_block_cap(8, 32, 32, 16), 256);
  EXPECT_EQ(kv_block_cap(1, 4, 10, 16), 10);  // at least one max_seq_len sequence
  // max_batch 4096 of 2^20 blocks (max_seq_len 4M, blocks of 4): 2^32 wrapped to 0 in int arithmetic. Held
  // so that the last slot of the cache and its padding block, an int32, does not wrap either.
  const int32_t most = std::numeric_limits<int32_t>::max();
  EXPECT_EQ(kv_block_cap(4096, 1 << 20, 1 << 20, 4), most / 4 - 1);
  EXPECT_EQ(kv_block_cap(4096, 1 << 19, 1 << 19, 1, 3), most - 3);
  const int cap = kv_block_cap(1 << 16, 1 << 16, 1, 16);
  EXPECT_LE(int64_t(cap + 1) * 16 - 1, most);
}

TEST(KvCacheSizing, InconsistentInputsAreErrors) {
  KvCacheSizing s = sizing(0);
  s.bytes_per_block = 0;
  EXPECT_THROW(kv_blocks_to_allocate(s, 1'000'000), Error);
  s = sizing(0);
  s.min_blocks = 65;  // more than the cap
  EXPECT_THROW(kv_blocks_to_allocate(s, 1'000'000), Error);
}

}  // namespace
}  // namespace tpserve
