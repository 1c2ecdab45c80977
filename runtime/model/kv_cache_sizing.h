// How many paged-KV blocks a rank allocates. runtime.num_kv_blocks > 0 fixes the count; 0 sizes the cache
// from the memory the backend has left after weights and step workspace (the CUDA arena, itself
// gpu_memory_fraction of the GPU), capped at what max_batch sequences of max_seq_len can use. Every rank
// must hold the same count (the plan names blocks): the model agrees on the smallest.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

namespace tpserve {

struct KvCacheSizing {
  size_t bytes_per_block = 0;  // K and V, every layer (and the MTP head's)
  int requested = 0;           // runtime.num_kv_blocks; 0 = from memory
  int cap = 0;                 // max_batch x blocks per sequence: more would never be used
  int min_blocks = 0;          // one sequence of max_seq_len
  size_t reserve_bytes = 0;    // left free (allocation alignment, later small allocations)
  int extra_blocks = 1;        // allocated beyond the count (the graph padding block)
  // Without a backend budget (host memory): this rank's share of what the host has available (MemAvailable
  // over the ranks), so that a cache
  // larger than that is refused naming the settings rather than ending in bad_alloc or the OOM killer.
  // nullopt: unknown, not checked.
  std::optional<size_t> host_available;
};

// KvCacheSizing::cap for max_seqs sequences of blocks_per_seq blocks (at least min_blocks), computed in 64
// bits and held so that every slot of the cache and its extra blocks (block x block_size + offset, an int32
// in the step's slot mapping) fits in an int32.
int kv_block_cap(int max_seqs, int blocks_per_seq, int min_blocks, int block_size, int extra_blocks = 1);

// The block count (without the extra blocks). memory_left: what the backend can still allocate (nullopt:
// no fixed budget, e.g. host memory: the cap, or the requested count, if host_available holds it). Throws
// tpserve::Error naming the sizes and the settings to change when the cache cannot hold one max_seq_len
// sequence, or a requested count does not fit.
int kv_blocks_to_allocate(const KvCacheSizing& s, std::optional<size_t> memory_left);

}  // namespace tpserve
