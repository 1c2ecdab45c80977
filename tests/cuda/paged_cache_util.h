// A paged KV cache of random values and a step's attention metadata on both backends, for the attention
// tests (tests/cuda/attention_test.cc, attention_prologue_test.cc).
#pragma once

#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "tests/cuda/op_test_util.h"

namespace tpserve::cuda_test {

struct AttentionCase {
  int q_heads, kv_heads, head_dim, block_size;
  std::vector<int> query_lens;    // tokens of each sequence in the step
  std::vector<int> context_lens;  // cache length of each sequence after the step
};

// A paged cache filled with random values and the step metadata, on both backends.
struct PagedSetup {
  Pair k_cache, v_cache, positions, slots, query_start, context_lens, tables;
  AttentionMeta cpu_meta, gpu_meta;
  int tokens = 0;
};

// Blocks shuffled over the cache (a few spare); each sequence's tokens at the end of its context.
PagedSetup make_paged(Backends& b, std::mt19937& rng, const AttentionCase& c);

std::string describe(const AttentionCase& c);
void PrintTo(const AttentionCase& c, std::ostream* os);

}  // namespace tpserve::cuda_test
