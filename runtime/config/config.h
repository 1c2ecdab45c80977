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
  int max_num_batched_tokens = 512;  // tokens per step: decode rows + prefill chunks
  int sampling_candidates = 256;     // best logits kept per rank and row; top-p/top-k act within them
  // CUDA: small-M GEMVs stage their weights in shared memory (kernels/gemv.h).
  bool staged_gemv = true;
  // CUDA: the cp.async groups a staged GEMV warp cuts its weight pieces into (1-4; the product of each
  // group starts once it has landed).
  int staged_gemv_copy_groups = 1;
  // CUDA: linear() takes the GEMV up to this many rows, cuBLASLt above (0-16).
  int gemv_max_rows = 8;
  // CUDA: the MoE down kernel issues its first weight loads before its PDL wait (during gate_up's tail).
  bool moe_down_early_loads = true;
  // CUDA: each MoE down block copies its weight rows into shared memory whole (cp.async) before its PDL
  // wait, instead of loading them into registers a few k blocks at a time.
  bool moe_down_staged = true;
  // CUDA: decode attention (and short queries) on tensor cores instead of CUDA cores.
  bool attention_tensor_cores = true;
  // CUDA: decode steps (one token a sequence) on tensor cores run the q/k RMSNorm + RoPE + KV append inside
  // the attention kernel, one launch instead of two; false: two launches (for A/B).
  bool attention_fused_prologue = true;
  // CUDA: the tensor-core decode attention reads its step inputs (query starts, positions; with the folded
  // prologue the slots, norm weights and rotation) before the PDL wait; false: after it (for A/B).
  bool attention_inputs_before_wait = true;
  // CUDA: a step's MoE with one token skips moe_align (each of its k distinct experts is its own work item).
  bool moe_one_token_direct = true;
  // CUDA: the MoE combine runs inside the residual add + RMSNorm that follows it (one launch fewer a layer;
  // one GPU, or wherever the MoE output needs no all-reduce).
  bool moe_fused_norm = true;
  // CUDA: decode attention cuts a context into ranges of a multiple of this many keys (a multiple of 16;
  // rounded up to a multiple of 32 on CUDA cores); larger: fewer blocks and fewer partials to merge at short
  // contexts.
  int attention_split_keys = 32;
  // CUDA: the MoE combine issues up to 8 slots' loads together; false: one slot after another (for A/B).
  bool moe_combine_batched_loads = true;
  // CUDA: RMSNorm reads its weights, and q/k norm + RoPE its positions, KV slots and norm weights, before
  // the PDL wait (during the predecessor's tail); false: after it (for A/B; the same results).
  bool norm_loads_before_wait = true;
  // CUDA: the MoE combine fused into the norm after it reads its routing (top-k ids and weights) before the
  // PDL wait, and only the expert rows after it; false: all after the wait (for A/B; the same results).
  bool moe_combine_early_routing = true;
  // CUDA (SM90+), one rank: steps of up to this many tokens run the residual add + RMSNorm before each MoE
  // block, the router and the top-k gating as one launch of one thread-block cluster
  // (kernels/router_fused.h); larger steps, and 0, run them as three launches. 0..16; 4: measured faster at 1
  // and 4 tokens, slower at 16 (docs/PERF.md).
  int router_fused_max_tokens = 4;
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

// The HTTP server on rank 0 (docs/serving.md, "Running in production"). Every resource a client can make
// the server spend is bounded here; each limit, when hit, is answered with a 4xx/503 and serving goes on.
struct ServerConfig {
  std::string host = "127.0.0.1";  // loopback unless told otherwise
  int port = 8000;
  int threads = 64;  // HTTP requests handled at once (a streaming request holds one until it ends)
  // A file holding the API key (whitespace trimmed). The key itself is never written in a config file (nor
  // logged); TPSERVE_API_KEY in the environment wins over the file. No key: no authentication.
  std::string api_key_file;
  int max_connections = 256;      // open TCP connections (idle ones included); one more: 503 and closed
  int max_queued_requests = 256;  // generation requests waiting for the engine; one more: 503
  int max_body_bytes = 8 << 20;
  int max_prompt_tokens = 0;    // 0 = the context (max_model_len) is the only bound
  int max_output_tokens = 0;    // max_tokens per request; 0 = the room left in the context
  int max_stop_sequences = 16;  // entries of `stop` and of `stop_token_ids`, each
  int max_stop_string_bytes = 256;
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
