// Config: the typed, validated form of a tpserve YAML file (see docs/config.md for every key).
//
// Section names follow vLLM where a user would look for them. Parsing (config_parser.cc) rejects unknown
// keys with a did-you-mean and names the full key path, the value given and what is allowed; checks that
// need the model's shape (tp divides heads, experts divisible by ep, ...) run later in validate_layout().
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/log.h"
#include "kernels/policy.h"

namespace tpserve {

struct SyntheticModelConfig {
  std::string preset = "tiny";  // tiny | small | qwen3-30b-a3b
  uint64_t seed = 0;
  int layers = 0;  // 0 = the preset's layer count
  int vocab = 0;   // 0 = the preset's vocabulary
  bool mtp = false;
};

struct ModelConfig {
  std::string path;                               // Hugging Face checkpoint directory
  std::optional<SyntheticModelConfig> synthetic;  // exactly one of path / synthetic
  std::string tokenizer;    // tokenizer.json path; empty = <path>/tokenizer.json if present
  std::string served_name;  // name in /v1/models; empty = derived from path or preset
};

enum class MoeParallel { kTp, kEp };
enum class MoeDispatch { kAllReduce, kAllToAll };

struct ParallelConfig {
  int tp = 1;
  int ep = 1;
  MoeParallel moe_parallel = MoeParallel::kTp;
  MoeDispatch moe_dispatch = MoeDispatch::kAllReduce;
};

enum class BackendKind { kAuto, kCpu, kCuda };

struct RuntimeConfig {
  BackendKind backend = BackendKind::kAuto;
  int max_batch = 16;
  int max_seq_len = 4096;
  int kv_block_size = 16;
  double gpu_memory_fraction = 0.9;
  int num_kv_blocks = 0;  // 0 = sized from memory (CPU backend: enough for max_batch x max_seq_len)
  int max_num_batched_tokens = 512;  // tokens per step: decode rows + prefill chunks
  int sampling_candidates = 256;     // best logits kept per rank and row; top-p/top-k act within them
};

struct CudaGraphConfig {
  bool enabled = true;
  std::vector<int> capture_sizes;  // empty = 1, 2, 4, 8, 16, ... up to max_batch
};

struct LaunchConfig {
  kernels::PdlSettings pdl;  // kill_switch is filled from the environment, not from YAML
};

enum class SpeculativeMethod { kNone, kMtp };

struct SpeculativeConfig {
  SpeculativeMethod method = SpeculativeMethod::kNone;
  int num_speculative_tokens = 0;  // 1..4 with mtp
};

struct ServerConfig {
  std::string host = "127.0.0.1";
  int port = 8000;
  int threads = 64;  // HTTP connections served at once (a streaming request holds one)
};

struct LoggingConfig {
  LogLevel level = LogLevel::kInfo;
};

struct Config {
  ModelConfig model;
  ParallelConfig parallel;
  RuntimeConfig runtime;
  CudaGraphConfig cuda_graph;
  LaunchConfig launch;
  SpeculativeConfig speculative;
  ServerConfig server;
  LoggingConfig logging;
  std::string source;  // file it came from, for messages
};

const char* moe_parallel_name(MoeParallel v);
const char* moe_dispatch_name(MoeDispatch v);
const char* backend_kind_name(BackendKind v);
const char* speculative_method_name(SpeculativeMethod v);

// The model shape facts that layout validation needs (filled from ModelSpec by the caller).
struct LayoutFacts {
  int num_attention_heads = 0;
  int num_key_value_heads = 0;
  int num_experts = 0;
  int moe_intermediate_size = 0;
  int dense_intermediate_size = 0;  // 0 when every layer is MoE
  int vocab_size = 0;
  bool has_mtp = false;
};

// Cross-field checks that need the world size and the model; throws ConfigError listing every problem.
void validate_layout(const Config& config, int world_size, const LayoutFacts& facts);

}  // namespace tpserve
