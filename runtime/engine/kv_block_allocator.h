// KvBlockAllocator: host bookkeeping of the paged KV cache (which blocks are free). The blocks themselves
// live in the backend (Qwen3MoeModel owns them); block tables travel in each StepBatch.
#pragma once

#include <cstdint>
#include <vector>

namespace tpserve {

class KvBlockAllocator {
 public:
  KvBlockAllocator(int num_blocks, int block_size);

  int block_size() const { return block_size_; }
  int num_blocks() const { return num_blocks_; }
  int num_free() const { return static_cast<int>(free_.size()); }
  double usage() const { return 1.0 - static_cast<double>(free_.size()) / num_blocks_; }
  int blocks_for(int tokens) const { return (tokens + block_size_ - 1) / block_size_; }

  // Grows `table` to hold `tokens` tokens; false (and nothing taken) when there are not enough free blocks.
  bool reserve(std::vector<int32_t>& table, int tokens);
  void release(std::vector<int32_t>& table);

 private:
  int num_blocks_;
  int block_size_;
  std::vector<int32_t> free_;  // stack: lowest block ids handed out first
};

}  // namespace tpserve
