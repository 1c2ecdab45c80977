// KvBlockAllocator: host bookkeeping of the paged KV cache: which blocks are free, how many sequences hold
// each, and, with prefix caching, which full blocks hold the KV of which token prefix, so that a sequence
// starting with tokens another one computed takes those blocks instead of computing them again. The blocks
// themselves live in the backend (Qwen3MoeModel owns them); block tables travel in each StepBatch.
//
// A cached block is known by its parent (the cached block before it in its sequence; none for a first
// block) and its block_size tokens, or its tokens and the token after it where the KV at a block's last
// position depends on that token too (an MTP draft layer's), all compared exactly, so that no hash
// collision can hand a sequence another prompt's KV. A block no sequence holds stays cached until its room is
// needed: free uncached blocks are taken first, then cached leaves (blocks no cached block continues), least
// recently used first. A sequence that holds a cached block holds its parents too, so every unheld cached
// block can be reached by evicting leaves, and num_free() counts them as free.
#pragma once

#include <cstdint>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

namespace tpserve {

// What a cached block is known by besides its parent: nothing (no prefix caching), its tokens, or its tokens
// and the first token of the next block.
enum class PrefixCacheKey { kNone, kBlockTokens, kBlockAndNextToken };

class KvBlockAllocator {
 public:
  KvBlockAllocator(int num_blocks, int block_size, PrefixCacheKey key = PrefixCacheKey::kNone);

  int block_size() const { return block_size_; }
  int num_blocks() const { return num_blocks_; }
  bool prefix_caching() const { return key_tokens_ > 0; }
  // Blocks a reserve() may take: free ones and cached ones no sequence holds.
  int num_free() const { return static_cast<int>(free_.size()) + unheld_cached_; }
  // Share of the blocks sequences hold (cached blocks nobody holds count as free, as in vLLM).
  double usage() const { return 1.0 - static_cast<double>(num_free()) / num_blocks_; }
  int blocks_for(int tokens) const { return (tokens + block_size_ - 1) / block_size_; }
  // Cached blocks (held or not).
  int num_cached() const { return static_cast<int>(index_.size()); }

  // Grows `table` to hold `tokens` tokens; false (and nothing taken) when there are not enough free blocks.
  bool reserve(std::vector<int32_t>& table, int tokens);
  // Lets go of every block of `table` (cached ones stay cached) and empties it.
  void release(std::vector<int32_t>& table);

  // Prefix caching (without it: match finds nothing, commit enters nothing). The leading blocks of a
  // sequence of `num_tokens` tokens that its tokens key (all full blocks, or those followed by a token).
  int keyed_blocks(int num_tokens) const;
  // Holds, appended to the empty `table`, the cached blocks of the longest cached chain of `tokens`' keyed
  // blocks, at most `max_blocks`; returns how many it took.
  int match(const std::vector<int32_t>& tokens, int max_blocks, std::vector<int32_t>& table);
  // Enters table[from, to) as the KV of `tokens`' keyed blocks from..to-1 (their KV must be complete,
  // table[0, from) already cached); returns the end of the cached run, which is `to` unless a parent was
  // dropped by reset(). A block whose key is already cached under another id is replaced in `table` by that
  // one and freed, so that one copy of a prefix is kept.
  int commit(std::vector<int32_t>& table, const std::vector<int32_t>& tokens, int from, int to);
  // Forgets every cached prefix (the blocks were written by someone who did not tell the allocator).
  void reset();

 private:
  struct Entry {
    bool cached = false;
    int32_t parent = -1;  // cached block before this one in its sequence, -1 for a first block
    uint64_t key = 0;     // hash of (parent, key tokens): index_ key
    int children = 0;     // cached blocks whose parent this is
    uint64_t last_use = 0;
  };
  uint64_t key_of(int32_t parent, const int32_t* tokens) const;
  // The cached block keyed by `tokens` (key_tokens_ of them) after `parent`, or -1.
  int32_t find(int32_t parent, const int32_t* tokens) const;
  void hold(int32_t block);
  void let_go(int32_t block);
  // Takes a block for a new holder: a free one, else the least recently used unheld cached leaf.
  int32_t take_block();
  void uncache(int32_t block);
  void update_leaf(int32_t block);

  int num_blocks_;
  int block_size_;
  int key_tokens_;  // tokens a cached block is known by: 0 (no prefix caching), block_size or block_size + 1
  std::vector<int32_t> free_;  // uncached, unheld; a stack: lowest block ids handed out first
  std::vector<int> holders_;
  std::vector<Entry> entries_;
  std::vector<int32_t> keys_;  // [num_blocks][key_tokens_]: a cached block's key tokens
  std::unordered_multimap<uint64_t, int32_t> index_;
  std::set<std::pair<uint64_t, int32_t>> evictable_;  // (last_use, block) of unheld cached leaves
  int unheld_cached_ = 0;
  uint64_t clock_ = 0;
};

}  // namespace tpserve
