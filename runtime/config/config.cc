#include "runtime/config/config.h"

#include <yaml-cpp/yaml.h>

#include "runtime/config/config_parser.h"

namespace tpserve {

const char* moe_parallel_name(MoeParallel v) {
  return v == MoeParallel::kTp ? "tp" : "ep";
}
const char* moe_dispatch_name(MoeDispatch v) {
  return v == MoeDispatch::kAllReduce ? "allreduce" : "alltoall";
}
const char* all_reduce_impl_name(AllReduceImpl v) {
  switch (v) {
    case AllReduceImpl::kAuto:
      return "auto";
    case AllReduceImpl::kNccl:
      return "nccl";
    case AllReduceImpl::kOneShot:
      return "one_shot";
  }
  return "?";
}
const char* backend_kind_name(BackendKind v) {
  switch (v) {
    case BackendKind::kAuto:
      return "auto";
    case BackendKind::kCpu:
      return "cpu";
    case BackendKind::kCuda:
      return "cuda";
  }
  return "?";
}
const char* speculative_method_name(SpeculativeMethod v) {
  return v == SpeculativeMethod::kNone ? "none" : "mtp";
}
const char* reasoning_parser_name(ReasoningParser v) {
  return v == ReasoningParser::kNone ? "none" : "qwen3";
}
const char* tool_call_parser_name(ToolCallParser v) {
  return v == ToolCallParser::kNone ? "none" : "hermes";
}

namespace {

// parallel.* against the number of processes mpirun started.
void add_world_size_problems(const ParallelConfig& par, int world_size, std::vector<std::string>& p) {
  const std::string world = std::to_string(world_size);
  if (par.tp != world_size)
    p.push_back("parallel.tp: got " + std::to_string(par.tp) + " but the job has " + world +
                " ranks (tp must equal the number of processes mpirun starts)");
  if (par.moe_parallel == MoeParallel::kEp && world_size > 1 && par.ep != world_size)
    p.push_back("parallel.moe.parallel: ep needs parallel.ep equal to the number of processes (" + world +
                "), got " + std::to_string(par.ep));
  if (par.ep != 1 && par.ep != world_size)
    p.push_back("parallel.ep: got " + std::to_string(par.ep) + ", expected 1 or the world size " + world);
}

}  // namespace

void validate_world_size(const Config& config, int world_size) {
  std::vector<std::string> p;
  add_world_size_problems(config.parallel, world_size, p);
  if (!p.empty()) throw ConfigError(std::move(p));
}

void validate_layout(const Config& config, int world_size, const LayoutFacts& facts) {
  std::vector<std::string> p;
  const auto& par = config.parallel;
  add_world_size_problems(par, world_size, p);
  if (facts.num_attention_heads > 0 && facts.num_attention_heads % par.tp != 0)
    p.push_back("parallel.tp: " + std::to_string(par.tp) +
                " does not divide num_attention_heads=" + std::to_string(facts.num_attention_heads));
  if (facts.num_key_value_heads > 0 && par.tp > 0 && facts.num_key_value_heads % par.tp != 0 &&
      par.tp % facts.num_key_value_heads != 0)
    p.push_back("parallel.tp: " + std::to_string(par.tp) + " and num_key_value_heads=" +
                std::to_string(facts.num_key_value_heads) + " must divide one another");
  if (facts.vocab_size > 0 && facts.vocab_size % par.tp != 0)
    p.push_back("parallel.tp: " + std::to_string(par.tp) + " does not divide vocab_size=" +
                std::to_string(facts.vocab_size) + " (vocab-parallel embedding and lm_head)");
  if (par.moe_parallel == MoeParallel::kEp && facts.num_experts > 0 && facts.num_experts % par.ep != 0)
    p.push_back("parallel.ep: " + std::to_string(par.ep) +
                " does not divide num_experts=" + std::to_string(facts.num_experts));
  if (par.moe_parallel == MoeParallel::kTp && facts.moe_intermediate_size > 0 &&
      facts.moe_intermediate_size % par.tp != 0)
    p.push_back("parallel.moe.parallel: tp needs tp=" + std::to_string(par.tp) +
                " to divide moe_intermediate_size=" + std::to_string(facts.moe_intermediate_size));
  if (facts.dense_intermediate_size > 0 && facts.dense_intermediate_size % par.tp != 0)
    p.push_back("parallel.tp: " + std::to_string(par.tp) + " does not divide intermediate_size=" +
                std::to_string(facts.dense_intermediate_size) + " of the dense MLP layers");
  if (config.speculative.method == SpeculativeMethod::kMtp && !facts.has_mtp)
    p.push_back(
        "speculative.method: mtp needs a checkpoint with an mtp.* head (num_nextn_predict_layers); this "
        "model has none (tpserve-gen --mtp makes synthetic ones)");
  if (!p.empty()) throw ConfigError(std::move(p));
}

std::string config_to_yaml(const Config& c) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "model" << YAML::Value << YAML::BeginMap;
  if (!c.model.path.empty()) out << YAML::Key << "path" << YAML::Value << c.model.path;
  if (c.model.synthetic) {
    const auto& s = *c.model.synthetic;
    out << YAML::Key << "synthetic" << YAML::Value << YAML::BeginMap << YAML::Key << "preset" << YAML::Value
        << s.preset << YAML::Key << "seed" << YAML::Value << s.seed << YAML::Key << "layers" << YAML::Value
        << s.layers << YAML::Key << "vocab" << YAML::Value << s.vocab << YAML::Key << "mtp" << YAML::Value
        << s.mtp << YAML::EndMap;
  }
  if (!c.model.tokenizer.empty()) out << YAML::Key << "tokenizer" << YAML::Value << c.model.tokenizer;
  if (!c.model.served_name.empty()) out << YAML::Key << "served_name" << YAML::Value << c.model.served_name;
  out << YAML::EndMap;

  out << YAML::Key << "parallel" << YAML::Value << YAML::BeginMap << YAML::Key << "tp" << YAML::Value
      << c.parallel.tp << YAML::Key << "ep" << YAML::Value << c.parallel.ep << YAML::Key << "moe"
      << YAML::Value << YAML::BeginMap << YAML::Key << "parallel" << YAML::Value
      << moe_parallel_name(c.parallel.moe_parallel) << YAML::Key << "dispatch" << YAML::Value
      << moe_dispatch_name(c.parallel.moe_dispatch) << YAML::EndMap << YAML::Key << "all_reduce"
      << YAML::Value << all_reduce_impl_name(c.parallel.all_reduce) << YAML::EndMap;

  const auto& r = c.runtime;
  out << YAML::Key << "runtime" << YAML::Value << YAML::BeginMap << YAML::Key << "backend" << YAML::Value
      << backend_kind_name(r.backend) << YAML::Key << "max_batch" << YAML::Value << r.max_batch << YAML::Key
      << "max_seq_len" << YAML::Value << r.max_seq_len << YAML::Key << "kv_block_size" << YAML::Value
      << r.kv_block_size << YAML::Key << "gpu_memory_fraction" << YAML::Value << r.gpu_memory_fraction
      << YAML::Key << "num_kv_blocks" << YAML::Value << r.num_kv_blocks << YAML::Key
      << "max_num_batched_tokens" << YAML::Value << r.max_num_batched_tokens << YAML::Key
      << "sampling_candidates" << YAML::Value << r.sampling_candidates << YAML::Key << "enable_prefix_caching"
      << YAML::Value << r.enable_prefix_caching;
  for_each_kernel_switch(r.kernels, [&](const char* name, const auto& field, auto...) {
    out << YAML::Key << name << YAML::Value << field;
  });
  out << YAML::EndMap;

  out << YAML::Key << "cuda_graph" << YAML::Value << YAML::BeginMap << YAML::Key << "enabled" << YAML::Value
      << c.cuda_graph.enabled;
  if (!c.cuda_graph.capture_sizes.empty())
    out << YAML::Key << "capture_sizes" << YAML::Value << YAML::Flow << c.cuda_graph.capture_sizes;
  out << YAML::EndMap;

  out << YAML::Key << "launch" << YAML::Value << YAML::BeginMap << YAML::Key << "pdl" << YAML::Value
      << YAML::BeginMap << YAML::Key << "default" << YAML::Value
      << kernels::pdl_mode_name(c.launch.pdl.default_mode) << YAML::Key << "sites" << YAML::Value
      << YAML::BeginMap;
  for (int i = 0; i < kernels::kNumSites; ++i)
    if (c.launch.pdl.sites[i])
      out << YAML::Key << kernels::site_name(static_cast<kernels::Site>(i)) << YAML::Value
          << kernels::pdl_mode_name(*c.launch.pdl.sites[i]);
  out << YAML::EndMap << YAML::EndMap << YAML::EndMap;

  out << YAML::Key << "speculative" << YAML::Value << YAML::BeginMap << YAML::Key << "method" << YAML::Value
      << speculative_method_name(c.speculative.method) << YAML::Key << "num_speculative_tokens" << YAML::Value
      << c.speculative.num_speculative_tokens << YAML::EndMap;

  const ServerConfig& sv = c.server;
  out << YAML::Key << "server" << YAML::Value << YAML::BeginMap << YAML::Key << "host" << YAML::Value
      << sv.host << YAML::Key << "port" << YAML::Value << sv.port << YAML::Key << "threads" << YAML::Value
      << sv.threads;
  if (!sv.api_key_file.empty()) out << YAML::Key << "api_key_file" << YAML::Value << sv.api_key_file;
  out << YAML::Key << "max_connections" << YAML::Value << sv.max_connections << YAML::Key
      << "max_queued_requests" << YAML::Value << sv.max_queued_requests << YAML::Key << "max_body_bytes"
      << YAML::Value << sv.max_body_bytes << YAML::Key << "max_prompt_tokens" << YAML::Value
      << sv.max_prompt_tokens << YAML::Key << "max_output_tokens" << YAML::Value << sv.max_output_tokens
      << YAML::Key << "max_stop_sequences" << YAML::Value << sv.max_stop_sequences << YAML::Key
      << "max_stop_string_bytes" << YAML::Value << sv.max_stop_string_bytes << YAML::Key << "reasoning_parser"
      << YAML::Value << reasoning_parser_name(sv.reasoning_parser) << YAML::Key << "tool_call_parser"
      << YAML::Value << tool_call_parser_name(sv.tool_call_parser) << YAML::Key << "idle_timeout_s"
      << YAML::Value << sv.idle_timeout_s << YAML::Key << "request_timeout_s" << YAML::Value
      << sv.request_timeout_s << YAML::Key << "write_timeout_s" << YAML::Value << sv.write_timeout_s
      << YAML::EndMap;

  out << YAML::Key << "logging" << YAML::Value << YAML::BeginMap << YAML::Key << "level" << YAML::Value
      << log_level_name(c.logging.level) << YAML::EndMap;
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace tpserve
