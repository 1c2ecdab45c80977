#include "runtime/engine/kv_block_allocator.h"

#include <algorithm>
#include <functional>

#include "common/counter_hash.h"
#include "common/error.h"

namespace tpserve {

KvBlockAllocator::KvBlockAllocator(int num_blocks, int block_size, PrefixCacheKey key)
    : num_blocks_(num_blocks),
      block_size_(block_size),
      key_tokens_(key == PrefixCacheKey::kNone          ? 0
                  : key == PrefixCacheKey::kBlockTokens ? block_size
                                                        : block_size + 1) {
  TPS_CHECK(num_blocks > 0 && block_size > 0, "KV cache of ", num_blocks, " blocks of ", block_size,
            " tokens");
  for (int b = num_blocks - 1; b >= 0; --b) free_.push_back(b);
  holders_.assign(num_blocks, 0);
  entries_.assign(num_blocks, Entry{});
  keys_.assign(static_cast<size_t>(num_blocks) * key_tokens_, 0);
}

uint64_t KvBlockAllocator::key_of(int32_t parent, const int32_t* tokens) const {
  uint64_t h = mix64(static_cast<uint64_t>(static_cast<int64_t>(parent)) + 0x9e3779b97f4a7c15ull);
  for (int i = 0; i < key_tokens_; ++i) h = mix64(h ^ static_cast<uint32_t>(tokens[i]));
  return h;
}

int32_t KvBlockAllocator::find(int32_t parent, const int32_t* tokens) const {
  const auto [first, last] = index_.equal_range(key_of(parent, tokens));
  for (auto it = first; it != last; ++it) {
    const int32_t b = it->second;
    if (entries_[b].parent == parent &&
        std::equal(tokens, tokens + key_tokens_, keys_.begin() + static_cast<size_t>(b) * key_tokens_))
      return b;
  }
  return -1;
}

// An unheld cached block is evictable once no cached block continues it.
void KvBlockAllocator::update_leaf(int32_t block) {
  const Entry& e = entries_[block];
  if (e.cached && holders_[block] == 0 && e.children == 0) evictable_.insert({e.last_use, block});
}

void KvBlockAllocator::hold(int32_t block) {
  Entry& e = entries_[block];
  if (holders_[block]++ == 0 && e.cached) {
    --unheld_cached_;
    evictable_.erase({e.last_use, block});
  }
  e.last_use = ++clock_;
}

void KvBlockAllocator::let_go(int32_t block) {
  TPS_CHECK(holders_[block] > 0, "KV block ", block, " released more often than taken");
  if (--holders_[block] > 0) return;
  Entry& e = entries_[block];
  if (!e.cached) {
    free_.push_back(block);
    return;
  }
  ++unheld_cached_;
  e.last_use = ++clock_;
  update_leaf(block);
}

void KvBlockAllocator::uncache(int32_t block) {
  Entry& e = entries_[block];
  const auto [first, last] = index_.equal_range(e.key);
  for (auto it = first; it != last; ++it)
    if (it->second == block) {
      index_.erase(it);
      break;
    }
  if (e.parent >= 0) {
    --entries_[e.parent].children;
    update_leaf(e.parent);
  }
  e = Entry{};
}

int32_t KvBlockAllocator::take_block() {
  int32_t b;
  if (!free_.empty()) {
    b = free_.back();
    free_.pop_back();
  } else {
    TPS_CHECK(!evictable_.empty(), "KV cache: no block to take although ", unheld_cached_,
              " cached blocks are unheld");
    b = evictable_.begin()->second;
    evictable_.erase(evictable_.begin());
    --unheld_cached_;
    uncache(b);
  }
  holders_[b] = 1;
  entries_[b].last_use = ++clock_;
  return b;
}

bool KvBlockAllocator::reserve(std::vector<int32_t>& table, int tokens) {
  const int need = blocks_for(tokens) - static_cast<int>(table.size());
  if (need <= 0) return true;
  if (need > num_free()) return false;
  for (int i = 0; i < need; ++i) table.push_back(take_block());
  return true;
}

void KvBlockAllocator::release(std::vector<int32_t>& table) {
  // Last blocks first: a sequence's tail is the least likely part to be shared, so it goes first when room
  // is needed (blocks let go of together are evicted in the order they were let go of).
  for (auto it = table.rbegin(); it != table.rend(); ++it) let_go(*it);
  table.clear();
}

int KvBlockAllocator::keyed_blocks(int num_tokens) const {
  if (!prefix_caching() || num_tokens < key_tokens_) return 0;
  return (num_tokens - key_tokens_) / block_size_ + 1;  // block j is keyed when j * bs + key <= num_tokens
}

int KvBlockAllocator::match(const std::vector<int32_t>& tokens, int max_blocks, std::vector<int32_t>& table) {
  TPS_CHECK(table.empty(), "prefix match into a table that holds blocks already");
  const int n = std::min(max_blocks, keyed_blocks(static_cast<int>(tokens.size())));
  for (int j = 0; j < n; ++j) {
    const int32_t b = find(j == 0 ? -1 : table.back(), tokens.data() + static_cast<size_t>(j) * block_size_);
    if (b < 0) break;
    hold(b);
    table.push_back(b);
  }
  return static_cast<int>(table.size());
}

int KvBlockAllocator::commit(std::vector<int32_t>& table, const std::vector<int32_t>& tokens, int from,
                             int to) {
  if (!prefix_caching()) return from;
  TPS_CHECK(from >= 0 && to <= static_cast<int>(table.size()) &&
                to <= keyed_blocks(static_cast<int>(tokens.size())),
            "KV prefix commit of blocks ", from, "..", to, " of a table of ", table.size(), " for ",
            tokens.size(), " tokens");
  for (int j = from; j < to; ++j) {
    const int32_t parent = j == 0 ? -1 : table[j - 1];
    if (parent >= 0 && !entries_[parent].cached) return j;  // forgotten by reset(): the chain ends here
    const int32_t* content = tokens.data() + static_cast<size_t>(j) * block_size_;
    const int32_t mine = table[j];
    TPS_CHECK(!entries_[mine].cached && holders_[mine] == 1, "KV block ", mine, " committed twice");
    if (const int32_t other = find(parent, content); other >= 0) {
      hold(other);
      table[j] = other;
      let_go(mine);
      continue;
    }
    Entry& e = entries_[mine];
    e.cached = true;
    e.parent = parent;
    e.key = key_of(parent, content);
    e.children = 0;
    std::copy(content, content + key_tokens_, keys_.begin() + static_cast<size_t>(mine) * key_tokens_);
    index_.emplace(e.key, mine);
    if (parent >= 0) ++entries_[parent].children;
  }
  return to;
}

void KvBlockAllocator::reset() {
  if (!prefix_caching()) return;
  for (int32_t b = 0; b < num_blocks_; ++b) {
    if (!entries_[b].cached) continue;
    entries_[b] = Entry{};
    if (holders_[b] == 0) free_.push_back(b);
  }
  // Lowest ids first again, as at the start.
  std::sort(free_.begin(), free_.end(), std::greater<int32_t>());
  index_.clear();
  evictable_.clear();
  unheld_cached_ = 0;
}

}  // namespace tpserve
