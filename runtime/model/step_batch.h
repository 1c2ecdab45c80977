// StepBatch: everything one forward step needs, built on the host by the engine (and broadcast by the
// control plane under MPI), in the order the model consumes it. T tokens from S sequences; R rows sampled.
#pragma once

#include <cstdint>
#include <vector>

namespace tpserve {

struct SamplingParams {
  float temperature = 0.0f;  // 0 = greedy
  int32_t top_k = 0;         // 0 = off
  float top_p = 1.0f;        // 1 = off
  float min_p = 0.0f;        // 0 = off
  int64_t seed = 0;
};

struct StepBatch {
  std::vector<int32_t> token_ids;     // [T]
  std::vector<int32_t> positions;     // [T]
  std::vector<int32_t> slot_mapping;  // [T] KV slot (block * block_size + offset); -1 = padding
  std::vector<int32_t> query_start;   // [S + 1]
  std::vector<int32_t> context_lens;  // [S] tokens cached for the sequence after this step
  std::vector<int32_t> block_tables;  // [S * max_blocks_per_seq]
  int max_blocks_per_seq = 0;
  std::vector<int32_t> sample_rows;      // [R] token rows whose next token is drawn
  std::vector<SamplingParams> sampling;  // [R]
  std::vector<int64_t> sample_counters;  // [R] index of the token being drawn within its sequence

  int num_tokens() const { return static_cast<int>(token_ids.size()); }
  int num_seqs() const { return static_cast<int>(context_lens.size()); }
  int num_samples() const { return static_cast<int>(sample_rows.size()); }
};

struct StepResult {
  std::vector<int32_t> tokens;  // [R]
  std::vector<float> logits;    // [R, vocab] when asked for (tests, debugging)
};

}  // namespace tpserve
