// Helpers for model tests: fixture paths and references, configs, and hand-built single-sequence steps.
#pragma once

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "runtime/config/config_parser.h"
#include "runtime/model/step_batch.h"
#include "runtime/weights/safetensors_file.h"

namespace tpserve::testing_util {

inline std::string fixture_dir(const std::string& name) {
  return std::string(TPSERVE_SOURCE_DIR) + "/tests/fixtures/" + name;
}
inline const std::vector<std::string>& fixture_names() {
  static const std::vector<std::string> names = {"gqa4", "sparse_step", "no_norm_topk"};
  return names;
}

struct Reference {
  std::vector<int32_t> prompt;
  std::vector<int32_t> tokens;  // prompt + greedy continuation
  std::vector<float> logits;    // [tokens, vocab]
  int64_t vocab = 0;
};

inline std::vector<int32_t> read_i64_as_i32(const SafetensorsFile& f, const std::string& name) {
  const auto bytes = f.bytes(name);
  std::vector<int64_t> wide(bytes.size() / sizeof(int64_t));
  std::memcpy(wide.data(), bytes.data(), bytes.size());
  return std::vector<int32_t>(wide.begin(), wide.end());
}

inline Reference load_reference(const std::string& fixture) {
  SafetensorsFile f(fixture_dir(fixture) + "/reference.safetensors");
  Reference r;
  r.prompt = read_i64_as_i32(f, "prompt");
  r.tokens = read_i64_as_i32(f, "tokens");
  const TensorMeta m = f.meta("logits");
  r.vocab = m.shape[1];
  r.logits.resize(m.numel());
  std::vector<Range> ranges{{0, m.shape[0]}, {0, m.shape[1]}};
  f.read("logits", ranges, DType::kF32, r.logits.data());
  return r;
}

inline Config make_config(const std::string& model_yaml, const std::vector<std::string>& overrides = {}) {
  return parse_config(
      model_yaml + "\nruntime: {backend: cpu, max_batch: 4, max_seq_len: 128, kv_block_size: 4}\n", "test",
      overrides);
}
inline Config fixture_config(const std::string& fixture, const std::vector<std::string>& overrides = {}) {
  return make_config("model: {path: " + fixture_dir(fixture) + "}", overrides);
}

// One sequence whose KV lives in blocks 0, 1, 2, ...: tokens [start, start + n) of `tokens`, every row
// sampled greedily (sample_all) or only the last.
inline StepBatch sequence_step(const std::vector<int32_t>& tokens, int start, int n, int block_size,
                               bool sample_all) {
  StepBatch b;
  const int ctx = start + n;
  const int blocks = (ctx + block_size - 1) / block_size;
  for (int p = start; p < ctx; ++p) {
    b.token_ids.push_back(tokens[p]);
    b.positions.push_back(p);
    b.slot_mapping.push_back(p);  // block b holds positions [b * bs, (b + 1) * bs): slot == position
  }
  b.query_start = {0, n};
  b.context_lens = {ctx};
  for (int i = 0; i < blocks; ++i) b.block_tables.push_back(i);
  b.max_blocks_per_seq = blocks;
  for (int r = sample_all ? 0 : n - 1; r < n; ++r) {
    b.sample_rows.push_back(r);
    b.sampling.push_back(SamplingParams{});
    b.sample_counters.push_back(start + r + 1);
  }
  return b;
}

// ||a - b|| / ||b|| over one row.
inline double relative_l2(const float* a, const float* b, int64_t n) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; ++i) {
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

}  // namespace tpserve::testing_util
