#include "runtime/model/kv_cache_sizing.h"

#include <algorithm>
#include <limits>

#include "common/error.h"

namespace tpserve {
namespace {

double gib(size_t bytes) {
  return static_cast<double>(bytes) / double(size_t(1) << 30);
}

}  // namespace

int kv_block_cap(int max_seqs, int blocks_per_seq, int min_blocks, int block_size, int extra_blocks) {
  const int64_t cap = std::max<int64_t>(int64_t(max_seqs) * blocks_per_seq, min_blocks);
  return static_cast<int>(
      std::min<int64_t>(cap, std::numeric_limits<int32_t>::max() / block_size - extra_blocks));
}

int kv_blocks_to_allocate(const KvCacheSizing& s, std::optional<size_t> memory_left) {
  TPS_CHECK(s.bytes_per_block > 0 && s.cap > 0 && s.min_blocks > 0 && s.min_blocks <= s.cap,
            "KV cache sizing: bytes per block ", s.bytes_per_block, ", cap ", s.cap, ", minimum ",
            s.min_blocks);
  const size_t usable =
      memory_left ? (*memory_left > s.reserve_bytes ? *memory_left - s.reserve_bytes : 0) : 0;
  const int64_t fit = memory_left ? static_cast<int64_t>(usable / s.bytes_per_block) - s.extra_blocks : s.cap;
  if (!memory_left && s.host_available) {
    // Host memory: the cache is what the settings ask for, so a cache that cannot fit names them.
    const int count = s.requested > 0 ? s.requested : s.cap;
    const size_t need = (size_t(count) + s.extra_blocks) * s.bytes_per_block;
    TPS_CHECK(
        need <= *s.host_available, "KV cache: ", count, " blocks (",
        s.requested > 0 ? "runtime.num_kv_blocks" : "runtime.max_batch x runtime.max_seq_len", ") need ",
        gib(need), " GiB of host memory but ", gib(*s.host_available), " GiB are available to this rank: ",
        s.requested > 0 ? "lower runtime.num_kv_blocks"
                        : "lower runtime.max_seq_len or runtime.max_batch, or set runtime.num_kv_blocks");
  }
  if (s.requested > 0) {
    // A fixed count: only a count that cannot fit at all is refused here (no reserve).
    const size_t need = (size_t(s.requested) + s.extra_blocks) * s.bytes_per_block;
    TPS_CHECK(
        !memory_left || need <= *memory_left, "KV cache: runtime.num_kv_blocks=", s.requested, " needs ",
        gib(need), " GiB but ", gib(memory_left.value_or(0)),
        " GiB are left after weights and workspace: lower runtime.num_kv_blocks (0 sizes it from memory)",
        " or raise runtime.gpu_memory_fraction");
    return s.requested;
  }
  TPS_CHECK(
      fit >= s.min_blocks, "KV cache: ", gib(usable), " GiB left after weights and workspace hold ",
      std::max<int64_t>(fit, 0), " blocks (", gib(s.bytes_per_block),
      " GiB each) but one sequence of runtime.max_seq_len needs ", s.min_blocks,
      ": lower runtime.max_seq_len, shard the model over more GPUs, or raise runtime.gpu_memory_fraction");
  return static_cast<int>(std::min<int64_t>(fit, s.cap));
}

}  // namespace tpserve
