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
#include "runtime/backend/cuda_kernel_switches.h"

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

// How the GPU data plane sums across ranks: NCCL's all-reduce, or a one-shot kernel over NVLink (IPC peer
// buffers) for messages up to its buffer size, NCCL above (parallel/one_shot_all_reduce.h). Auto: the
// one-shot where every rank can use it (one host, peer access), else NCCL; decided alike on every rank.
enum class AllReduceImpl { kAuto, kNccl, kOneShot };

struct ParallelConfig {
  int tp = 1;
  int ep = 1;
  MoeParallel moe_parallel = MoeParallel::kTp;
  MoeDispatch moe_dispatch = MoeDispatch::kAllReduce;
  AllReduceImpl all_reduce = AllReduceImpl::kAuto;
};

enum class BackendKind { kAuto, kCpu, kCuda };

struct RuntimeConfig {
  BackendKind backend = BackendKind::kAuto;
  int max_batch = 16;
  int max_seq_len = 4096;
  int kv_block_size = 16;
  double gpu_memory_fraction = 0.9;
  int num_kv_blocks = 0;  // 0 = sized from memory (CPU backend: enough for max_batch x max_seq_len)
  int max_num_batched_tokens = 512;   // tokens per step: decode rows + prefill chunks
  int sampling_candidates = 256;      // best logits kept per rank and row; top-p/top-k act within them
  bool enable_prefix_caching = true;  // reuse the KV of full blocks of tokens another request computed
  // CUDA: the kernel switches (runtime.<name> keys of the same names).
  CudaKernelSwitches kernels;
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

// How the server reads a chat answer's text (docs/serving.md, "Reasoning and tool calls").
enum class ReasoningParser { kNone, kQwen3 };  // qwen3: a leading <think> ... </think> -> reasoning_content
enum class ToolCallParser { kNone, kHermes };  // hermes: <tool_call>{json}</tool_call> -> tool_calls

inline constexpr int kAutoThreadsSpare = 16;
inline constexpr int kMaxServerThreads = 4096;
inline constexpr int kAutoIdleConnections = 256;

// The HTTP server on rank 0 (docs/serving.md, "Running in production"). Every resource a client can make
// the server spend is bounded here; each limit, when hit, is answered with a 4xx/503 and serving goes on.
struct ServerConfig {
  std::string host = "127.0.0.1";  // loopback unless told otherwise
  int port = 8000;
  // HTTP requests handled at once (a request holds a thread until its response is written, a stream until
  // it ends); 0 in a config file: auto, resolved by the parser to kAutoThreadsSpare more than every running
  // and waiting request can hold (runtime.max_batch + max_queued_requests), so that probes and refusals are
  // always answered at once.
  int threads = 0;
  // A file holding the API key (whitespace trimmed). The key itself is never written in a config file (nor
  // logged); TPSERVE_API_KEY in the environment wins over the file. No key: no authentication.
  std::string api_key_file;
  // Open TCP connections (idle ones included); one more: 503 and closed. 0 in a config file: auto, resolved
  // to threads + kAutoIdleConnections, so that every request a thread can take has its connection and idle
  // keep-alive connections have room beside them.
  int max_connections = 0;
  int max_queued_requests = 256;  // generation requests waiting for the engine; one more: 503
  int max_body_bytes = 8 << 20;
  int max_prompt_tokens = 0;    // 0 = the context (max_model_len) is the only bound
  int max_output_tokens = 0;    // max_tokens per request; 0 = the room left in the context
  int max_stop_sequences = 16;  // entries of `stop` and of `stop_token_ids`, each
  int max_stop_string_bytes = 256;
  ReasoningParser reasoning_parser = ReasoningParser::kQwen3;
  ToolCallParser tool_call_parser = ToolCallParser::kHermes;  // only for requests that offer tools
  double idle_timeout_s = 10;     // a connection with no request started is closed after this
  double request_timeout_s = 30;  // from a request's first byte to its last (head and body): else 408
  double write_timeout_s = 30;    // a client that accepts no response bytes for this long is dropped
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
const char* all_reduce_impl_name(AllReduceImpl v);
const char* backend_kind_name(BackendKind v);
const char* speculative_method_name(SpeculativeMethod v);
const char* reasoning_parser_name(ReasoningParser v);
const char* tool_call_parser_name(ToolCallParser v);

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

// parallel.tp and parallel.ep against the number of processes, before anything is built on them; throws
// ConfigError (exit 2 on every rank, as every rank sees the same).
void validate_world_size(const Config& config, int world_size);

// Cross-field checks that need the world size and the model; throws ConfigError listing every problem.
void validate_layout(const Config& config, int world_size, const LayoutFacts& facts);

}  // namespace tpserve
