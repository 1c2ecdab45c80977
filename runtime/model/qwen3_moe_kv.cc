// The paged KV cache: one K and one V tensor per layer (and for the MTP head), [blocks + 1, block size,
// local KV heads, head_dim]; block `num_kv_blocks` is the padding block that graph padding rows write.
#include <algorithm>

#include "common/host_memory.h"
#include "common/log.h"
#include "runtime/model/kv_cache_sizing.h"
#include "runtime/model/qwen3_moe.h"

namespace tpserve {

void Qwen3MoeModel::allocate_kv_cache() {
  const DType act = backend_.activation_dtype();
  const int caches = spec_.num_layers + (weights_.mtp.present ? 1 : 0);
  KvCacheSizing sizing;
  sizing.bytes_per_block =
      size_t(2) * caches * options_.kv_block_size * kv_heads_ * spec_.head_dim * dtype_size(act);
  sizing.requested = options_.num_kv_blocks;
  sizing.min_blocks = options_.max_blocks_per_seq;
  sizing.cap = kv_block_cap(options_.max_seqs, options_.max_blocks_per_seq, sizing.min_blocks,
                            options_.kv_block_size, sizing.extra_blocks);
  // Each tensor may lose an alignment's worth; keep a little for allocations made after the model's.
  sizing.reserve_bytes = size_t(32) << 20;
  sizing.reserve_bytes += size_t(2) * caches * 4096;
  // Host memory: ranks on one host share it (the CPU backend's multi-rank runs are one host): a rank's share.
  if (const auto host = available_host_memory()) sizing.host_available = *host / size_t(comm_.size());

  // Every rank computes what fits in its memory; the plan names blocks, so all take the smallest count.
  const int P = comm_.size();
  Tensor mine, all;
  if (P > 1) {
    mine = backend_.alloc(DType::kI32, {1});
    all = backend_.alloc(DType::kI32, {P});
  }
  int blocks = kv_blocks_to_allocate(sizing, backend_.memory_left());
  if (P > 1) {
    backend_.copy_from_host(mine, &blocks);
    comm_.all_gather(mine.data, all.data, 1, DType::kI32);
    std::vector<int32_t> counts(static_cast<size_t>(P));
    backend_.copy_to_host(counts.data(), all);
    blocks = *std::min_element(counts.begin(), counts.end());
  }
  if (options_.num_kv_blocks == 0)
    log_info("KV cache sized from memory: ", blocks, " blocks (", int64_t(blocks) * options_.kv_block_size,
             " tokens; cap ", sizing.cap, " = max_batch x max_seq_len)");
  options_.num_kv_blocks = blocks;

  auto layer_cache = [&] {
    return KvCacheLayer{backend_.alloc(act, {blocks + 1, options_.kv_block_size, kv_heads_, spec_.head_dim}),
                        backend_.alloc(act, {blocks + 1, options_.kv_block_size, kv_heads_, spec_.head_dim})};
  };
  for (int l = 0; l < spec_.num_layers; ++l) {
    kv_.push_back(layer_cache());
    kv_bytes_ += kv_.back().k.nbytes() + kv_.back().v.nbytes();
  }
  if (weights_.mtp.present) {
    mtp_kv_ = layer_cache();
    kv_bytes_ += mtp_kv_.k.nbytes() + mtp_kv_.v.nbytes();
  }
}

}  // namespace tpserve
