// The KV block allocator on its own: reservation, and prefix caching (exact matches along a chain of full
// blocks, one copy of a prefix, least recently used leaves evicted first, reset), checked against a
// simulated cache whose blocks remember what was written to them.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>

#include "common/error.h"
#include "runtime/engine/kv_block_allocator.h"

namespace tpserve {
namespace {

constexpr int kBs = 4;

std::vector<int32_t> tokens_of(std::initializer_list<int> blocks) {
  // Each entry fills one block with that value (then value + 1, ...), so blocks differ by their entry.
  std::vector<int32_t> t;
  for (int b : blocks)
    for (int i = 0; i < kBs; ++i) t.push_back(b * 10 + i);
  return t;
}

// A sequence computes its blocks: reserve, then commit the full ones.
std::vector<int32_t> compute(KvBlockAllocator& a, const std::vector<int32_t>& tokens) {
  std::vector<int32_t> table;
  const int hit = a.match(tokens, static_cast<int>(tokens.size()) / kBs, table);
  EXPECT_TRUE(a.reserve(table, static_cast<int>(tokens.size())));
  EXPECT_EQ(a.commit(table, tokens, hit, static_cast<int>(tokens.size()) / kBs),
            static_cast<int>(tokens.size()) / kBs);
  return table;
}

TEST(KvBlockAllocator, ReservesAndReleasesWithoutPrefixCaching) {
  KvBlockAllocator a(8, kBs);
  std::vector<int32_t> t;
  EXPECT_TRUE(a.reserve(t, 9));
  EXPECT_EQ(t, (std::vector<int32_t>{0, 1, 2}));  // lowest ids first
  EXPECT_EQ(a.num_free(), 5);
  EXPECT_FALSE(a.reserve(t, 9 + 6 * kBs));  // needs 6 more, 5 free: nothing taken
  EXPECT_EQ(t.size(), 3u);
  EXPECT_DOUBLE_EQ(a.usage(), 3.0 / 8);
  const auto tokens = tokens_of({1, 2});
  std::vector<int32_t> other;
  EXPECT_EQ(a.match(tokens, 2, other), 0);  // no cache: nothing matches, commits do nothing
  EXPECT_EQ(a.commit(t, tokens, 0, 2), 0);
  a.release(t);
  EXPECT_TRUE(t.empty());
  EXPECT_EQ(a.num_free(), 8);
  EXPECT_EQ(a.num_cached(), 0);
}

TEST(KvBlockAllocator, MatchesTheLongestCachedChainExactly) {
  KvBlockAllocator a(16, kBs, PrefixCacheKey::kBlockTokens);
  auto first = compute(a, tokens_of({1, 2, 3}));
  EXPECT_EQ(a.num_cached(), 3);
  // A second sequence sharing two blocks holds the same two, then its own.
  std::vector<int32_t> second;
  EXPECT_EQ(a.match(tokens_of({1, 2, 4}), 3, second), 2);
  EXPECT_EQ(second, (std::vector<int32_t>{first[0], first[1]}));
  // The same block content after another first block is another prefix: no match past the first block.
  std::vector<int32_t> third;
  EXPECT_EQ(a.match(tokens_of({5, 2, 3}), 3, third), 0);
  // Partial blocks never match; max_blocks cuts the chain.
  auto partial = tokens_of({1, 2});
  partial.pop_back();
  std::vector<int32_t> t;
  EXPECT_EQ(a.match(partial, 2, t), 1);
  a.release(t);
  EXPECT_EQ(a.match(tokens_of({1, 2, 3}), 2, t), 2);
  a.release(t);
  EXPECT_EQ(a.match(tokens_of({1, 2, 3}), 0, t), 0);
  EXPECT_THROW(a.match(tokens_of({1}), 3, second), Error);  // into a table holding blocks
  a.release(second);
  a.release(first);
  // Cached blocks nobody holds count as free and still match.
  EXPECT_EQ(a.num_free(), 16);
  EXPECT_EQ(a.match(tokens_of({1, 2, 3}), 3, t), 3);
  EXPECT_EQ(a.num_free(), 13);
  a.release(t);
}

// Keyed by the next token too (MTP): a block is entered only once the token after it is known, and matches
// only a sequence that goes on with that token.
TEST(KvBlockAllocator, BlocksKeyedByTheNextTokenMatchOnlyThatContinuation) {
  KvBlockAllocator a(16, kBs, PrefixCacheKey::kBlockAndNextToken);
  EXPECT_EQ(a.keyed_blocks(8), 1);  // the second block has no token after it
  EXPECT_EQ(a.keyed_blocks(9), 2);
  EXPECT_EQ(a.keyed_blocks(4), 0);
  auto tokens = tokens_of({1, 2});
  std::vector<int32_t> table;
  ASSERT_TRUE(a.reserve(table, 8));
  EXPECT_THROW(a.commit(table, tokens, 0, 2), Error);  // block 1 is not keyed yet
  tokens.push_back(77);
  EXPECT_EQ(a.commit(table, tokens, 0, 2), 2);
  std::vector<int32_t> t;
  auto other = tokens_of({1, 2});
  other.push_back(78);
  EXPECT_EQ(a.match(other, 2, t), 1);  // block 1 was followed by 77, not 78
  a.release(t);
  EXPECT_EQ(a.match(tokens, 2, t), 2);
  a.release(t);
  a.release(table);
}

TEST(KvBlockAllocator, KeepsOneCopyOfAPrefixComputedTwiceAtOnce) {
  KvBlockAllocator a(16, kBs, PrefixCacheKey::kBlockTokens);
  const auto tokens = tokens_of({1, 2, 3});
  std::vector<int32_t> x, y;
  ASSERT_TRUE(a.reserve(x, 12));
  ASSERT_TRUE(a.reserve(y, 12));  // both computed in the same step: neither found the other cached
  EXPECT_EQ(a.num_free(), 10);
  EXPECT_EQ(a.commit(x, tokens, 0, 3), 3);
  const std::vector<int32_t> y_own = y;
  EXPECT_EQ(a.commit(y, tokens, 0, 3), 3);
  EXPECT_EQ(y, x);  // y now reads x's blocks; its own went back
  EXPECT_EQ(a.num_free(), 13);
  for (int32_t b : y_own) EXPECT_EQ(std::count(x.begin(), x.end(), b), 0);
  a.release(x);
  EXPECT_EQ(a.num_free(), 13);  // y still holds them
  a.release(y);
  EXPECT_EQ(a.num_free(), 16);
  EXPECT_EQ(a.num_cached(), 3);
}

TEST(KvBlockAllocator, EvictsFreeBlocksFirstThenLeastRecentlyUsedLeaves) {
  KvBlockAllocator a(6, kBs, PrefixCacheKey::kBlockTokens);
  auto old = compute(a, tokens_of({1, 2}));
  auto recent = compute(a, tokens_of({3, 4}));
  a.release(old);
  a.release(recent);
  // Two uncached blocks are taken before any cached one.
  std::vector<int32_t> t;
  ASSERT_TRUE(a.reserve(t, 2 * kBs));
  EXPECT_EQ(a.num_cached(), 4);
  // The next two come from the least recently used chain, leaf first: {1} stays, {1, 2} loses its tail.
  std::vector<int32_t> u;
  ASSERT_TRUE(a.reserve(u, kBs));
  EXPECT_EQ(a.num_cached(), 3);
  std::vector<int32_t> m;
  EXPECT_EQ(a.match(tokens_of({1, 2}), 2, m), 1);
  EXPECT_EQ(m.front(), old.front());
  a.release(m);  // {1} is now the most recently used
  ASSERT_TRUE(a.reserve(u, 2 * kBs));
  EXPECT_EQ(a.match(tokens_of({1}), 1, m), 1);
  a.release(m);
  EXPECT_EQ(a.match(tokens_of({3, 4}), 2, m), 1);  // {3, 4} lost its leaf instead
  a.release(m);
  // A block held by a sequence is never evicted: reserve fails rather than take it.
  std::vector<int32_t> held;
  EXPECT_EQ(a.match(tokens_of({1}), 1, held), 1);
  EXPECT_EQ(a.num_free(), 1);
  std::vector<int32_t> v;
  EXPECT_FALSE(a.reserve(v, 2 * kBs));
  EXPECT_TRUE(a.reserve(v, kBs));
  EXPECT_EQ(a.match(tokens_of({1}), 1, m), 1);
  a.release(m);
}

TEST(KvBlockAllocator, ResetForgetsEveryPrefixButNotTheHolders) {
  KvBlockAllocator a(8, kBs, PrefixCacheKey::kBlockTokens);
  auto kept = compute(a, tokens_of({1, 2}));
  auto gone = compute(a, tokens_of({3}));
  a.release(gone);
  a.reset();
  EXPECT_EQ(a.num_cached(), 0);
  EXPECT_EQ(a.num_free(), 6);  // the unheld cached block is free again; the held ones stay held
  std::vector<int32_t> t;
  EXPECT_EQ(a.match(tokens_of({1, 2}), 2, t), 0);
  // A sequence whose cached blocks were forgotten grows on, but its chain is not entered again.
  auto tokens = tokens_of({1, 2, 5});
  ASSERT_TRUE(a.reserve(kept, 12));
  EXPECT_EQ(a.commit(kept, tokens, 2, 3), 2);
  a.release(kept);
  EXPECT_EQ(a.num_free(), 8);
  EXPECT_EQ(a.num_cached(), 0);
}

// Random sequences over a small alphabet (many shared prefixes) start, grow and end on a small cache; every
// block remembers the tokens written to it at its positions, and the token its last position was computed
// with after it (as an MTP draft layer's KV is; a sequence's last computed row draws the next token).
// Whatever a match hands a sequence must hold exactly its tokens (and, keyed so, its next token), a block
// is shared only when cached, and the free count always adds up.
void random_sequences(PrefixCacheKey key) {
  std::mt19937 rng(1234);
  constexpr int kBlocks = 24;
  KvBlockAllocator a(kBlocks, kBs, key);
  std::vector<std::vector<int32_t>> written(kBlocks, std::vector<int32_t>(kBs + 1, -1));
  struct Seq {
    std::vector<int32_t> tokens, table;
    int computed = 0, committed = 0;
  };
  std::vector<Seq> live;
  int64_t hits = 0;
  for (int iter = 0; iter < 4000; ++iter) {
    const int op = static_cast<int>(rng() % 3);
    if (op == 0 && live.size() < 6) {  // a new sequence
      Seq s;
      const int len = 1 + static_cast<int>(rng() % 14);
      for (int i = 0; i < len; ++i) s.tokens.push_back(static_cast<int32_t>(rng() % 2));
      const int got = a.match(s.tokens, (len - 1) / kBs, s.table);
      for (int j = 0; j < got; ++j) {
        for (int i = 0; i < kBs; ++i) ASSERT_EQ(written[s.table[j]][i], s.tokens[j * kBs + i]) << iter;
        if (key == PrefixCacheKey::kBlockAndNextToken) {
          ASSERT_EQ(written[s.table[j]][kBs], s.tokens[(j + 1) * kBs]) << iter;
        }
      }
      s.computed = got * kBs;
      s.committed = got;
      hits += got;
      live.push_back(std::move(s));
    } else if (op == 1 && !live.empty()) {  // a step: compute up to 5 more tokens
      Seq& s = live[rng() % live.size()];
      const int upto = std::min<int>(static_cast<int>(s.tokens.size()), s.computed + 1 + rng() % 5);
      if (!a.reserve(s.table, upto)) continue;
      for (int p = s.computed; p < upto; ++p) {
        if (p + 1 == static_cast<int>(s.tokens.size())) s.tokens.push_back(static_cast<int32_t>(rng() % 2));
        written[s.table[p / kBs]][p % kBs] = s.tokens[p];
        if (p % kBs == kBs - 1) written[s.table[p / kBs]][kBs] = s.tokens[p + 1];
      }
      s.computed = upto;
      const int size = static_cast<int>(s.tokens.size());
      s.committed =
          a.commit(s.table, s.tokens, s.committed, std::min(s.computed / kBs, a.keyed_blocks(size)));
    } else if (op == 2 && !live.empty()) {  // a sequence ends
      const size_t i = rng() % live.size();
      a.release(live[i].table);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
    }
    // Blocks: held ones counted once per holder; one held by two sequences must be a cached prefix.
    std::map<int32_t, int> holders;
    for (const Seq& s : live)
      for (int32_t b : s.table) ++holders[b];
    int shared_uncommitted = 0;
    for (const Seq& s : live)
      for (size_t j = s.committed; j < s.table.size(); ++j) shared_uncommitted += holders[s.table[j]] > 1;
    ASSERT_EQ(shared_uncommitted, 0) << iter;
    ASSERT_EQ(a.num_free(), kBlocks - static_cast<int>(holders.size())) << iter;
  }
  EXPECT_GT(hits, 100);  // the alphabet made prefixes recur
  for (Seq& s : live) a.release(s.table);
  EXPECT_EQ(a.num_free(), kBlocks);
}

TEST(KvBlockAllocator, MatchedBlocksHoldWhatTheSequenceWouldWrite) {
  random_sequences(PrefixCacheKey::kBlockTokens);
}

TEST(KvBlockAllocator, MatchedBlocksKeyedByTheNextTokenHoldWhatTheSequenceWouldWrite) {
  random_sequences(PrefixCacheKey::kBlockAndNextToken);
}

}  // namespace
}  // namespace tpserve
