#include "runtime/engine/kv_block_allocator.h"

#include "common/error.h"

namespace tpserve {

KvBlockAllocator::KvBlockAllocator(int num_blocks, int block_size)
    : num_blocks_(num_blocks), block_size_(block_size) {
  TPS_CHECK(num_blocks > 0 && block_size > 0, "KV cache of ", num_blocks, " blocks of ", block_size,
            " tokens");
  for (int b = num_blocks - 1; b >= 0; --b) free_.push_back(b);
}

bool KvBlockAllocator::reserve(std::vector<int32_t>& table, int tokens) {
  const int need = blocks_for(tokens) - static_cast<int>(table.size());
  if (need <= 0) return true;
  if (need > num_free()) return false;
  for (int i = 0; i < need; ++i) {
    table.push_back(free_.back());
    free_.pop_back();
  }
  return true;
}

void KvBlockAllocator::release(std::vector<int32_t>& table) {
  for (auto it = table.rbegin(); it != table.rend(); ++it) free_.push_back(*it);
  table.clear();
}

}  // namespace tpserve
