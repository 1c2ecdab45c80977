#include "tests/cuda/paged_cache_util.h"

#include <algorithm>
#include <numeric>

namespace tpserve::cuda_test {

PagedSetup make_paged(Backends& b, std::mt19937& rng, const AttentionCase& c) {
  PagedSetup s;
  const int seqs = static_cast<int>(c.query_lens.size());
  int max_blocks = 1, total_blocks = 0;
  for (int ctx : c.context_lens) {
    const int blocks = (ctx + c.block_size - 1) / c.block_size;
    max_blocks = std::max(max_blocks, blocks);
    total_blocks += blocks;
  }
  const int num_blocks = total_blocks + 3;
  std::vector<int32_t> block_ids(num_blocks);
  std::iota(block_ids.begin(), block_ids.end(), 0);
  std::shuffle(block_ids.begin(), block_ids.end(), rng);
  std::vector<int32_t> tables(size_t(seqs) * max_blocks, 0), positions, slots, starts{0};
  int next = 0;
  for (int q = 0; q < seqs; ++q) {
    const int ctx = c.context_lens[q], qlen = c.query_lens[q];
    for (int i = 0; i < (ctx + c.block_size - 1) / c.block_size; ++i)
      tables[size_t(q) * max_blocks + i] = block_ids[next++];
    for (int pos = ctx - qlen; pos < ctx; ++pos) {
      positions.push_back(pos);
      slots.push_back(tables[size_t(q) * max_blocks + pos / c.block_size] * c.block_size +
                      pos % c.block_size);
    }
    starts.push_back(starts.back() + qlen);
  }
  s.tokens = starts.back();
  const std::vector<int64_t> cache_shape{num_blocks, c.block_size, c.kv_heads, c.head_dim};
  const size_t cache_n = size_t(num_blocks) * c.block_size * c.kv_heads * c.head_dim;
  auto kv = uniform(rng, cache_n), vv = uniform(rng, cache_n);
  s.k_cache = b.bf16(cache_shape, kv);
  s.v_cache = b.bf16(cache_shape, vv);
  s.positions = b.i32({s.tokens}, positions);
  s.slots = b.i32({s.tokens}, slots);
  s.query_start = b.i32({seqs + 1}, starts);
  std::vector<int32_t> ctx(c.context_lens.begin(), c.context_lens.end());
  s.context_lens = b.i32({seqs}, ctx);
  s.tables = b.i32({seqs, max_blocks}, tables);
  for (int side = 0; side < 2; ++side) {
    AttentionMeta& m = side == 0 ? s.cpu_meta : s.gpu_meta;
    auto pick = [&](const Pair& p) { return side == 0 ? p.cpu : p.gpu; };
    m.positions = pick(s.positions);
    m.slot_mapping = pick(s.slots);
    m.query_start = pick(s.query_start);
    m.context_lens = pick(s.context_lens);
    m.block_tables = pick(s.tables);
    m.num_seqs = seqs;
    m.max_query_len = *std::max_element(c.query_lens.begin(), c.query_lens.end());
    m.max_context_len = *std::max_element(c.context_lens.begin(), c.context_lens.end());
  }
  return s;
}

std::string describe(const AttentionCase& c) {
  std::string s = "Hq " + std::to_string(c.q_heads) + " Hkv " + std::to_string(c.kv_heads) + " D " +
                  std::to_string(c.head_dim) + " bs " + std::to_string(c.block_size) + " (q, ctx):";
  for (size_t i = 0; i < c.query_lens.size(); ++i)
    s += " (" + std::to_string(c.query_lens[i]) + ", " + std::to_string(c.context_lens[i]) + ")";
  return s;
}
void PrintTo(const AttentionCase& c, std::ostream* os) {
  *os << describe(c);
}

}  // namespace tpserve::cuda_test
