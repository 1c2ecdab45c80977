#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <tuple>

#include "runtime/config/config_parser.h"

namespace tpserve {
namespace {

const char* kMinimal = "model: {synthetic: {preset: tiny, seed: 1}}\n";

struct Malformed {
  const char* name;
  std::string yaml;
  std::string must_contain;  // the key path (and more) the message must name
};

void PrintTo(const Malformed& m, std::ostream* os) {
  *os << m.name;
}

std::string error_of(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
  try {
    parse_config(yaml, "test.yaml", overrides);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "<accepted>";
}

class MalformedConfig : public testing::TestWithParam<Malformed> {};

TEST_P(MalformedConfig, IsRejectedNamingTheKeyPath) {
  const Malformed& m = GetParam();
  const std::string msg = error_of(m.yaml);
  EXPECT_NE(msg, "<accepted>") << m.yaml;
  EXPECT_NE(msg.find(m.must_contain), std::string::npos) << "message:\n" << msg << "\nyaml:\n" << m.yaml;
}

const std::string M = kMinimal;
INSTANTIATE_TEST_SUITE_P(
    Config, MalformedConfig,
    testing::Values(
        Malformed{"syntax_unclosed_flow", "model: {path: x\n", "YAML syntax error at line"},
        Malformed{"syntax_bad_indent", "model:\n  path: a\n    b: c\n", "YAML syntax error"},
        Malformed{"syntax_tab", "model:\n\tpath: x\n", "YAML syntax error"},
        Malformed{"top_is_list", "- a\n- b\n", "top level must be a mapping"},
        Malformed{"unknown_section", M + "runtim: {max_batch: 2}\n",
                  "runtim: unknown key (did you mean 'runtime'?)"},
        Malformed{"unknown_key", M + "runtime: {max_batchs: 2}\n",
                  "runtime.max_batchs: unknown key (did you mean 'max_batch'?)"},
        Malformed{"unknown_nested", M + "parallel: {moe: {dispach: alltoall}}\n",
                  "parallel.moe.dispach: unknown key (did you mean 'dispatch'?)"},
        Malformed{"unknown_no_guess", M + "server: {zzzzzz: 1}\n",
                  "server.zzzzzz: unknown key; allowed keys"},
        Malformed{"missing_model", "runtime: {max_batch: 2}\n", "model: missing model.path"},
        Malformed{"key_twice", M + "runtime:\n  max_batch: 8\n  max_batch: 32\n",
                  "runtime.max_batch: given more than once"},
        Malformed{"section_twice", M + "runtime: {max_batch: 8}\nruntime: {max_seq_len: 100}\n",
                  "runtime: given more than once"},
        Malformed{"two_documents", M + "---\nruntime: {max_batch: 2}\n", "2 YAML documents"},
        Malformed{"null_scalar", M + "runtime:\n  max_batch:   # 64\n", "runtime.max_batch: no value given"},
        Malformed{"null_real", M + "runtime: {gpu_memory_fraction: }\n",
                  "runtime.gpu_memory_fraction: no value given"},
        Malformed{"timeout_below_a_millisecond", M + "server: {idle_timeout_s: 1e-300}\n",
                  "server.idle_timeout_s: got '1e-300', expected a number in [0.001, 86400]"},
        Malformed{"both_path_and_synthetic", "model: {path: /x, synthetic: {preset: tiny}}\n", "not both"},
        Malformed{"bad_preset", "model: {synthetic: {preset: huge}}\n", "model.synthetic.preset: got 'huge'"},
        Malformed{"negative_seed", "model: {synthetic: {seed: -4}}\n", "model.synthetic.seed: got '-4'"},
        Malformed{"layers_string", "model: {synthetic: {layers: many}}\n",
                  "model.synthetic.layers: got 'many'"},
        Malformed{"empty_path", "model: {path: ''}\n", "model.path: got '', expected a non-empty string"},
        Malformed{"model_is_scalar", "model: qwen\n", "model: expected a mapping"},
        Malformed{"tp_zero", M + "parallel: {tp: 0}\n",
                  "parallel.tp: got '0', expected an integer in [1, 1024]"},
        Malformed{"tp_float", M + "parallel: {tp: 1.5}\n", "parallel.tp: got '1.5'"},
        Malformed{"tp_list", M + "parallel: {tp: [2]}\n", "parallel.tp: got a list"},
        Malformed{"ep_negative", M + "parallel: {ep: -2}\n", "parallel.ep: got '-2'"},
        Malformed{"moe_parallel_bad", M + "parallel: {moe: {parallel: dp}}\n",
                  "parallel.moe.parallel: got 'dp', expected one of tp|ep"},
        Malformed{"dispatch_bad", M + "parallel: {moe: {parallel: ep, dispatch: a2a}}\n",
                  "parallel.moe.dispatch: got 'a2a', expected one of allreduce|alltoall"},
        Malformed{"ep_with_tp_moe", M + "parallel: {tp: 2, ep: 2, moe: {parallel: tp}}\n",
                  "parallel.moe.parallel: 'tp' contradicts parallel.ep=2"},
        Malformed{"all_reduce_bad", M + "parallel: {all_reduce: custom}\n",
                  "parallel.all_reduce: got 'custom', expected one of auto|nccl|one_shot"},
        Malformed{"alltoall_without_ep", M + "parallel: {moe: {parallel: tp, dispatch: alltoall}}\n",
                  "parallel.moe.dispatch: 'alltoall' needs parallel.moe.parallel: ep"},
        Malformed{"backend_bad", M + "runtime: {backend: rocm}\n",
                  "runtime.backend: got 'rocm', expected one of auto|cpu|cuda"},
        Malformed{"max_batch_zero", M + "runtime: {max_batch: 0}\n", "runtime.max_batch: got '0'"},
        Malformed{"max_batch_huge", M + "runtime: {max_batch: 100000}\n", "runtime.max_batch: got '100000'"},
        Malformed{"seq_len_word", M + "runtime: {max_seq_len: long}\n", "runtime.max_seq_len: got 'long'"},
        Malformed{"block_not_pow2", M + "runtime: {kv_block_size: 12}\n",
                  "runtime.kv_block_size: got 12, expected a power of two"},
        Malformed{"mem_fraction_zero", M + "runtime: {gpu_memory_fraction: 0}\n",
                  "runtime.gpu_memory_fraction: got '0', expected a number in (0, 1]"},
        Malformed{"mem_fraction_big", M + "runtime: {gpu_memory_fraction: 1.5}\n",
                  "runtime.gpu_memory_fraction: got '1.5'"},
        Malformed{"mem_fraction_nan", M + "runtime: {gpu_memory_fraction: .nan}\n",
                  "runtime.gpu_memory_fraction: got '.nan'"},
        Malformed{"graph_enabled_word", M + "cuda_graph: {enabled: yes please}\n",
                  "cuda_graph.enabled: got 'yes please', expected true or false"},
        Malformed{"capture_sizes_scalar", M + "cuda_graph: {capture_sizes: 8}\n",
                  "cuda_graph.capture_sizes: got '8', expected a non-empty list"},
        Malformed{"capture_size_over_batch",
                  M + "runtime: {max_batch: 4}\ncuda_graph: {capture_sizes: [1, 8]}\n",
                  "cuda_graph.capture_sizes[1]: got '8', expected an integer in [1, runtime.max_batch=4]"},
        Malformed{"capture_size_dup", M + "cuda_graph: {capture_sizes: [2, 2]}\n",
                  "contains a batch size twice"},
        Malformed{"pdl_default_bad", M + "launch: {pdl: {default: maybe}}\n",
                  "launch.pdl.default: got 'maybe', expected one of auto|on|off"},
        Malformed{"pdl_site_unknown", M + "launch: {pdl: {sites: {topk_gate: on}}}\n",
                  "launch.pdl.sites.topk_gate: unknown key (did you mean 'topk_gating'?)"},
        Malformed{"pdl_site_mode_bad", M + "launch: {pdl: {sites: {sampling: enabled}}}\n",
                  "launch.pdl.sites.sampling: got 'enabled'"},
        Malformed{"spec_method_bad", M + "speculative: {method: eagle}\n",
                  "speculative.method: got 'eagle', expected one of none|mtp"},
        Malformed{"spec_k_too_big", M + "speculative: {method: mtp, num_speculative_tokens: 5}\n",
                  "speculative.num_speculative_tokens: got '5', expected an integer in [0, 4]"},
        Malformed{"spec_k_without_method", M + "speculative: {num_speculative_tokens: 2}\n",
                  "speculative.num_speculative_tokens: got 2 but speculative.method is none"},
        Malformed{"spec_mtp_zero", M + "speculative: {method: mtp, num_speculative_tokens: 0}\n",
                  "expected 1..4 with speculative.method: mtp"},
        Malformed{"port_too_big", M + "server: {port: 70000}\n", "server.port: got '70000'"},
        Malformed{"threads_too_many", M + "server: {threads: 5000}\n",
                  "server.threads: got '5000', expected an integer in [0, 4096]"},
        Malformed{"host_list", M + "server: {host: [a, b]}\n", "server.host: got a list"},
        Malformed{"api_key_literal", M + "server: {api_key: sk-secret}\n",
                  "server.api_key: a key is never written in a config file"},
        Malformed{"api_key_file_empty", M + "server: {api_key_file: ''}\n",
                  "server.api_key_file: got '', expected a non-empty string"},
        Malformed{"max_connections_negative", M + "server: {max_connections: -1}\n",
                  "server.max_connections: got '-1', expected an integer in [0, 1048576]"},
        Malformed{"max_queued_word", M + "server: {max_queued_requests: lots}\n",
                  "server.max_queued_requests: got 'lots'"},
        Malformed{"body_limit_tiny", M + "server: {max_body_bytes: 10}\n",
                  "server.max_body_bytes: got '10', expected an integer in [1024, 1073741824]"},
        Malformed{"prompt_limit_negative", M + "server: {max_prompt_tokens: -1}\n",
                  "server.max_prompt_tokens: got '-1'"},
        Malformed{"stop_sequences_zero", M + "server: {max_stop_sequences: 0}\n",
                  "server.max_stop_sequences: got '0'"},
        Malformed{"idle_timeout_zero", M + "server: {idle_timeout_s: 0}\n",
                  "server.idle_timeout_s: got '0', expected a number in [0.001, 86400]"},
        Malformed{"request_timeout_list", M + "server: {request_timeout_s: [1]}\n",
                  "server.request_timeout_s: got a list"},
        Malformed{"reasoning_parser_bad", M + "server: {reasoning_parser: deepseek}\n",
                  "server.reasoning_parser: got 'deepseek', expected one of none|qwen3"},
        Malformed{"tool_call_parser_bad", M + "server: {tool_call_parser: true}\n",
                  "server.tool_call_parser: got 'true', expected one of none|hermes"},
        Malformed{"server_key_typo", M + "server: {max_conections: 5}\n",
                  "server.max_conections: unknown key (did you mean 'max_connections'?)"},
        Malformed{"log_level_bad", M + "logging: {level: verbose}\n",
                  "logging.level: got 'verbose', expected one of debug|info|warn|error|off"}),
    [](const testing::TestParamInfo<Malformed>& p) { return std::string(p.param.name); });

TEST(Config, MinimalGetsDefaults) {
  const Config c = parse_config(kMinimal, "x");
  ASSERT_TRUE(c.model.synthetic.has_value());
  EXPECT_EQ(c.model.synthetic->preset, "tiny");
  EXPECT_EQ(c.parallel.tp, 1);
  EXPECT_EQ(c.runtime.backend, BackendKind::kAuto);
  EXPECT_EQ(c.server.host, "127.0.0.1");
  EXPECT_EQ(c.launch.pdl.default_mode, kernels::PdlMode::kAuto);
  EXPECT_TRUE(c.runtime.enable_prefix_caching);  // as in vLLM and SGLang
}

TEST(Config, ServerLimitsDefaultsAndOverrides) {
  const Config d = parse_config(M, "x");
  EXPECT_EQ(d.server.host, "127.0.0.1");
  EXPECT_TRUE(d.server.api_key_file.empty());
  EXPECT_EQ(d.server.max_connections, d.server.threads + 256);  // auto: every thread's, and 256 idle
  EXPECT_EQ(d.server.max_queued_requests, 256);
  EXPECT_EQ(d.server.max_body_bytes, 8 << 20);
  EXPECT_EQ(d.server.max_prompt_tokens, 0);
  EXPECT_EQ(d.server.max_output_tokens, 0);
  EXPECT_EQ(d.server.max_stop_sequences, 16);
  EXPECT_EQ(d.server.max_stop_string_bytes, 256);
  EXPECT_EQ(d.server.idle_timeout_s, 10);
  EXPECT_EQ(d.server.request_timeout_s, 30);
  EXPECT_EQ(d.server.write_timeout_s, 30);
  // threads auto: every running (max_batch 16) and waiting (256) request, and 16 more.
  EXPECT_EQ(d.server.threads, 16 + 256 + 16);
  EXPECT_EQ(parse_config(M, "x", {"server.threads=8"}).server.threads, 8);
  EXPECT_EQ(parse_config(M, "x", {"server.threads=8"}).server.max_connections, 8 + 256);
  EXPECT_EQ(parse_config(M, "x", {"runtime.max_batch=64", "server.max_queued_requests=10"}).server.threads,
            90);
  EXPECT_EQ(parse_config(M, "x", {"server.max_queued_requests=100000"}).server.threads, 4096);
  EXPECT_EQ(d.server.reasoning_parser, ReasoningParser::kQwen3);
  EXPECT_EQ(d.server.tool_call_parser, ToolCallParser::kHermes);
  const Config c = parse_config(
      M + "server: {api_key_file: /run/secrets/key, max_connections: 8, idle_timeout_s: 0.5}\n", "x",
      {"server.max_prompt_tokens=100", "server.max_stop_sequences=2", "server.reasoning_parser=none",
       "server.tool_call_parser=none"});
  EXPECT_EQ(c.server.api_key_file, "/run/secrets/key");
  EXPECT_EQ(c.server.max_connections, 8);
  EXPECT_EQ(c.server.idle_timeout_s, 0.5);
  EXPECT_EQ(c.server.max_prompt_tokens, 100);
  EXPECT_EQ(c.server.max_stop_sequences, 2);
  EXPECT_EQ(c.server.reasoning_parser, ReasoningParser::kNone);
  EXPECT_EQ(c.server.tool_call_parser, ToolCallParser::kNone);
  // The resolved config names the key file, and parses back to the same limits.
  const std::string yaml = config_to_yaml(c);
  EXPECT_NE(yaml.find("api_key_file: /run/secrets/key"), std::string::npos) << yaml;
  EXPECT_EQ(config_to_yaml(parse_config(yaml, "resolved")), yaml);
  // A key given with --set is refused like one in the file.
  EXPECT_NE(error_of(M, {"server.api_key=sk-123"}).find("server.api_key: a key is never written"),
            std::string::npos);
}

TEST(Config, SetValuesHaveNoComments) {
  EXPECT_EQ(parse_config(M, "x", {"model.served_name=team model #2"}).model.served_name, "team model #2");
  EXPECT_NE(error_of(M, {"runtime.max_batch=8 # eight"}).find("runtime.max_batch: got '8 # eight'"),
            std::string::npos);
  EXPECT_EQ(parse_config(M, "x", {"runtime.max_batch=8"}).runtime.max_batch, 8);
  EXPECT_EQ(parse_config(M, "x", {"model.served_name='#quoted'"}).model.served_name, "#quoted");
  EXPECT_EQ(parse_config(M, "x", {"model.served_name=#1"}).model.served_name, "#1");
}

TEST(Config, SetWithoutAValueIsRefusedButANullSectionMeansDefaults) {
  const std::string msg = error_of(M + "runtime: {max_batch: 8}\n", {"runtime.max_batch="});
  EXPECT_NE(msg.find("runtime.max_batch: no value given"), std::string::npos) << msg;
  for (const char* key : {"cuda_graph.capture_sizes", "launch.pdl.sites.gemv"}) {
    const std::string e = error_of(M, {std::string(key) + "="});
    EXPECT_NE(e.find(std::string(key) + ": no value given"), std::string::npos) << e;
  }
  // README's switch from a synthetic model to a checkpoint: model.synthetic=null removes the section.
  const Config c = parse_config(M, "x", {"model.synthetic=null", "model.path=/tmp/ckpt"});
  EXPECT_EQ(c.model.path, "/tmp/ckpt");
  EXPECT_FALSE(c.model.synthetic.has_value());
  EXPECT_EQ(parse_config(M + "parallel:\nlogging: ~\n", "x").parallel.tp, 1);
}

TEST(Config, ReportsEveryProblemNotOnlyTheFirst) {
  try {
    parse_config(M + "runtime: {max_batch: 0, kv_block_size: 3}\nserver: {port: -1}\n", "x");
    FAIL() << "accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.problems().size(), 3u) << e.what();
  }
}

TEST(Config, EpImpliesExpertParallelMoe) {
  const Config c = parse_config(M + "parallel: {tp: 2, ep: 2, moe: {dispatch: alltoall}}\n", "x");
  EXPECT_EQ(c.parallel.moe_parallel, MoeParallel::kEp);
  EXPECT_EQ(c.parallel.moe_dispatch, MoeDispatch::kAllToAll);
}

TEST(Config, AllReduceImplementation) {
  const Config d = parse_config(M, "x");
  EXPECT_EQ(d.parallel.all_reduce, AllReduceImpl::kAuto);
  EXPECT_NE(config_to_yaml(d).find("all_reduce: auto"), std::string::npos) << config_to_yaml(d);
  EXPECT_EQ(parse_config(M + "parallel: {all_reduce: auto}\n", "x").parallel.all_reduce,
            AllReduceImpl::kAuto);
  EXPECT_EQ(parse_config(M, "x", {"parallel.all_reduce=nccl"}).parallel.all_reduce, AllReduceImpl::kNccl);
  const std::string bad = error_of(M, {"parallel.all_reduce=fast"});
  EXPECT_NE(bad.find("parallel.all_reduce: got 'fast', expected one of auto|nccl|one_shot"),
            std::string::npos)
      << bad;

  const Config c = parse_config(M + "parallel: {tp: 2, all_reduce: one_shot}\n", "x");
  EXPECT_EQ(c.parallel.all_reduce, AllReduceImpl::kOneShot);
  EXPECT_NE(config_to_yaml(c).find("all_reduce: one_shot"), std::string::npos) << config_to_yaml(c);
  EXPECT_EQ(parse_config(M, "x", {"parallel.all_reduce=one_shot"}).parallel.all_reduce,
            AllReduceImpl::kOneShot);
}

TEST(Config, PdlSitesAndSpeculative) {
  const Config c = parse_config(
      M + "launch: {pdl: {default: off, sites: {topk_gating: on}}}\nspeculative: {method: mtp}\n", "x");
  EXPECT_EQ(c.launch.pdl.default_mode, kernels::PdlMode::kOff);
  EXPECT_EQ(c.launch.pdl.sites[static_cast<int>(kernels::Site::kTopkGating)], kernels::PdlMode::kOn);
  EXPECT_FALSE(c.launch.pdl.sites[static_cast<int>(kernels::Site::kSampling)].has_value());
  EXPECT_EQ(c.speculative.num_speculative_tokens, 1);
}

TEST(Config, SetOverridesAreTypedAndValidated) {
  const Config c = parse_config(
      M, "x", {"runtime.max_batch=8", "cuda_graph.capture_sizes=[1,2,8]", "launch.pdl.sites.sampling=off"});
  EXPECT_EQ(c.runtime.max_batch, 8);
  EXPECT_TRUE(c.runtime.kernels.staged_gemv);
  EXPECT_TRUE(c.runtime.kernels.moe_down_early_loads);
  EXPECT_FALSE(
      parse_config(M, "x", {"runtime.moe_down_early_loads=false"}).runtime.kernels.moe_down_early_loads);
  EXPECT_TRUE(c.runtime.kernels.moe_down_staged);
  EXPECT_TRUE(c.runtime.kernels.moe_down_act_before_weights);
  EXPECT_FALSE(parse_config(M, "x", {"runtime.moe_down_act_before_weights=false"})
                   .runtime.kernels.moe_down_act_before_weights);
  EXPECT_TRUE(c.runtime.kernels.attention_tensor_cores);
  EXPECT_FALSE(
      parse_config(M, "x", {"runtime.attention_tensor_cores=false"}).runtime.kernels.attention_tensor_cores);
  EXPECT_TRUE(c.runtime.kernels.attention_fused_prologue);
  EXPECT_TRUE(c.runtime.kernels.attention_arrival_acq_rel);
  EXPECT_FALSE(parse_config(M, "x", {"runtime.attention_arrival_acq_rel=false"})
                   .runtime.kernels.attention_arrival_acq_rel);
  EXPECT_EQ(c.runtime.kernels.attention_split_min_keys, 64);
  EXPECT_EQ(c.runtime.kernels.attention_merge_in_o_max_ranges, 4);
  EXPECT_EQ(parse_config(M, "x", {"runtime.attention_merge_in_o_max_ranges=0"})
                .runtime.kernels.attention_merge_in_o_max_ranges,
            0);
  EXPECT_THROW(parse_config(M, "x", {"runtime.attention_merge_in_o_max_ranges=5"}), ConfigError);
  EXPECT_TRUE(c.runtime.kernels.attention_merge_in_o_groups);
  EXPECT_FALSE(parse_config(M, "x", {"runtime.attention_merge_in_o_groups=false"})
                   .runtime.kernels.attention_merge_in_o_groups);
  EXPECT_EQ(c.runtime.kernels.norm_next_gemv_trigger_early_max_rows, 16);
  EXPECT_EQ(parse_config(M, "x", {"runtime.norm_next_gemv_trigger_early_max_rows=0"})
                .runtime.kernels.norm_next_gemv_trigger_early_max_rows,
            0);
  EXPECT_THROW(parse_config(M, "x", {"runtime.norm_next_gemv_trigger_early_max_rows=17"}), ConfigError);
  EXPECT_TRUE(c.runtime.kernels.weights_l2_evict_first);
  EXPECT_TRUE(c.runtime.kernels.gemv_l2_evict_first);
  EXPECT_FALSE(
      parse_config(M, "x", {"runtime.gemv_l2_evict_first=false"}).runtime.kernels.gemv_l2_evict_first);
  EXPECT_FALSE(
      parse_config(M, "x", {"runtime.weights_l2_evict_first=false"}).runtime.kernels.weights_l2_evict_first);
  EXPECT_TRUE(c.runtime.kernels.attention_inputs_before_wait);
  EXPECT_FALSE(parse_config(M, "x", {"runtime.attention_inputs_before_wait=false"})
                   .runtime.kernels.attention_inputs_before_wait);
  EXPECT_TRUE(c.runtime.kernels.topk_gating_redux);
  EXPECT_FALSE(parse_config(M, "x", {"runtime.topk_gating_redux=false"}).runtime.kernels.topk_gating_redux);
  EXPECT_TRUE(c.runtime.kernels.topk_gating_by_logits);
  EXPECT_TRUE(
      parse_config(M, "x", {"runtime.topk_gating_by_logits=true"}).runtime.kernels.topk_gating_by_logits);
  EXPECT_FALSE(
      parse_config(M, "x", {"runtime.topk_gating_by_logits=false"}).runtime.kernels.topk_gating_by_logits);
  EXPECT_EQ(c.runtime.kernels.moe_gate_up_bulk_min_tokens, 1);
  EXPECT_EQ(parse_config(M, "x", {"runtime.moe_gate_up_bulk_min_tokens=0"})
                .runtime.kernels.moe_gate_up_bulk_min_tokens,
            0);
  EXPECT_THROW(parse_config(M, "x", {"runtime.moe_gate_up_bulk_min_tokens=-1"}), ConfigError);
  EXPECT_EQ(c.runtime.kernels.moe_gate_up_bulk_stages, 2);
  EXPECT_EQ(c.runtime.kernels.moe_gate_up_bulk_stages_one_token, 3);
  EXPECT_THROW(parse_config(M, "x", {"runtime.moe_gate_up_bulk_stages_one_token=1"}), ConfigError);
  EXPECT_TRUE(c.runtime.kernels.staged_gemv_x_global);
  EXPECT_THROW(parse_config(M, "x", {"runtime.moe_gate_up_bulk_stages=7"}), ConfigError);
  EXPECT_EQ(c.runtime.kernels.moe_gate_up_bulk_cols, 512);
  EXPECT_EQ(c.runtime.kernels.moe_gate_up_bulk_cols_one_token, 256);
  EXPECT_EQ(c.runtime.kernels.moe_gate_up_bulk_rotate_max_tokens, 1);
  EXPECT_EQ(parse_config(M, "x", {"runtime.moe_gate_up_bulk_cols=256"}).runtime.kernels.moe_gate_up_bulk_cols,
            256);
  EXPECT_EQ(parse_config(M, "x", {"runtime.moe_gate_up_bulk_cols_one_token=512"})
                .runtime.kernels.moe_gate_up_bulk_cols_one_token,
            512);
  EXPECT_THROW(parse_config(M, "x", {"runtime.moe_gate_up_bulk_cols=384"}), ConfigError);
  EXPECT_THROW(parse_config(M, "x", {"runtime.moe_gate_up_bulk_cols=1024"}), ConfigError);
  EXPECT_THROW(parse_config(M, "x", {"runtime.moe_gate_up_bulk_cols_one_token=300"}), ConfigError);
  EXPECT_THROW(parse_config(M, "x", {"runtime.moe_gate_up_bulk_rotate_max_tokens=-1"}), ConfigError);
  EXPECT_EQ(c.runtime.kernels.staged_gemv_blocks_per_sm, 3);
  EXPECT_THROW(parse_config(M, "x", {"runtime.staged_gemv_blocks_per_sm=5"}), ConfigError);
  EXPECT_THROW(parse_config(M, "x", {"runtime.staged_gemv_blocks_per_sm=0"}), ConfigError);
  EXPECT_EQ(c.runtime.kernels.staged_gemv_max_warps, 16);
  EXPECT_EQ(parse_config(M, "x", {"runtime.staged_gemv_max_warps=28"}).runtime.kernels.staged_gemv_max_warps,
            28);
  EXPECT_THROW(parse_config(M, "x", {"runtime.staged_gemv_max_warps=3"}), ConfigError);
  EXPECT_THROW(parse_config(M, "x", {"runtime.staged_gemv_max_warps=33"}), ConfigError);
  EXPECT_TRUE(c.runtime.kernels.router_fused_stores_after_gather);
  EXPECT_FALSE(parse_config(M, "x", {"runtime.router_fused_stores_after_gather=false"})
                   .runtime.kernels.router_fused_stores_after_gather);
  EXPECT_TRUE(c.runtime.kernels.router_fused_push_logits);
  EXPECT_FALSE(parse_config(M, "x", {"runtime.router_fused_push_logits=false"})
                   .runtime.kernels.router_fused_push_logits);
  EXPECT_TRUE(c.runtime.kernels.attention_kv_before_wait);
  EXPECT_FALSE(parse_config(M, "x", {"runtime.attention_kv_before_wait=false"})
                   .runtime.kernels.attention_kv_before_wait);
  EXPECT_FALSE(parse_config(M, "x", {"runtime.attention_fused_prologue=false"})
                   .runtime.kernels.attention_fused_prologue);
  EXPECT_EQ(c.runtime.kernels.attention_ranges_outermost_max_tokens, 0);
  EXPECT_EQ(parse_config(M, "x", {"runtime.attention_ranges_outermost_max_tokens=1"})
                .runtime.kernels.attention_ranges_outermost_max_tokens,
            1);
  EXPECT_THROW(parse_config(M, "x", {"runtime.attention_ranges_outermost_max_tokens=-1"}), ConfigError);
  EXPECT_TRUE(c.runtime.kernels.moe_one_token_direct);
  EXPECT_TRUE(c.runtime.kernels.moe_fused_norm);
  EXPECT_EQ(c.runtime.kernels.attention_split_keys, 32);
  EXPECT_TRUE(c.runtime.kernels.moe_combine_batched_loads);
  EXPECT_FALSE(parse_config(M, "x", {"runtime.moe_combine_batched_loads=false"})
                   .runtime.kernels.moe_combine_batched_loads);
  EXPECT_TRUE(c.runtime.kernels.norm_loads_before_wait);
  EXPECT_TRUE(c.runtime.kernels.moe_combine_early_routing);
  EXPECT_EQ(c.runtime.kernels.router_fused_max_tokens, 8);
  EXPECT_EQ(
      parse_config(M, "x", {"runtime.router_fused_max_tokens=0"}).runtime.kernels.router_fused_max_tokens, 0);
  EXPECT_THROW(parse_config(M, "x", {"runtime.router_fused_max_tokens=17"}), ConfigError);
  EXPECT_FALSE(parse_config(M, "x", {"runtime.moe_combine_early_routing=false"})
                   .runtime.kernels.moe_combine_early_routing);
  EXPECT_FALSE(
      parse_config(M, "x", {"runtime.norm_loads_before_wait=false"}).runtime.kernels.norm_loads_before_wait);
  EXPECT_EQ(parse_config(M, "x", {"runtime.attention_split_keys=128"}).runtime.kernels.attention_split_keys,
            128);
  EXPECT_EQ(parse_config(M, "x", {"runtime.attention_split_keys=16"}).runtime.kernels.attention_split_keys,
            16);
  EXPECT_EQ(parse_config(M, "x", {"runtime.attention_split_keys=48"}).runtime.kernels.attention_split_keys,
            48);
  EXPECT_THROW(parse_config(M, "x", {"runtime.attention_split_keys=40"}), ConfigError);
  EXPECT_THROW(parse_config(M, "x", {"runtime.attention_split_keys=8"}), ConfigError);
  EXPECT_THROW(parse_config(M, "x", {"runtime.attention_split_keys=0"}), ConfigError);
  EXPECT_EQ(c.runtime.kernels.staged_gemv_copy_groups, 1);
  EXPECT_EQ(
      parse_config(M, "x", {"runtime.staged_gemv_copy_groups=4"}).runtime.kernels.staged_gemv_copy_groups, 4);
  EXPECT_THROW(parse_config(M, "x", {"runtime.staged_gemv_copy_groups=5"}), ConfigError);
  EXPECT_FALSE(parse_config(M, "x", {"runtime.moe_fused_norm=false"}).runtime.kernels.moe_fused_norm);
  EXPECT_FALSE(
      parse_config(M, "x", {"runtime.moe_one_token_direct=false"}).runtime.kernels.moe_one_token_direct);
  EXPECT_FALSE(parse_config(M, "x", {"runtime.moe_down_staged=false"}).runtime.kernels.moe_down_staged);
  EXPECT_EQ(c.runtime.kernels.gemv_max_rows, 16);
  EXPECT_EQ(parse_config(M, "x", {"runtime.gemv_max_rows=4"}).runtime.kernels.gemv_max_rows, 4);
  EXPECT_THROW(parse_config(M, "x", {"runtime.gemv_max_rows=17"}), ConfigError);
  EXPECT_FALSE(parse_config(M, "x", {"runtime.staged_gemv=false"}).runtime.kernels.staged_gemv);
  EXPECT_EQ(c.cuda_graph.capture_sizes, (std::vector<int>{1, 2, 8}));
  EXPECT_EQ(c.launch.pdl.sites[static_cast<int>(kernels::Site::kSampling)], kernels::PdlMode::kOff);
  EXPECT_NE(error_of(M, {"runtime.max_batch=0"}).find("runtime.max_batch: got '0'"), std::string::npos);
  EXPECT_NE(error_of(M, {"runtime.max_bach=4"}).find("did you mean 'max_batch'"), std::string::npos);
  EXPECT_NE(error_of(M, {"novalue"}).find("--set 'novalue': expected key.path=value"), std::string::npos);
  EXPECT_NE(error_of(M, {"runtime..x=1"}).find("empty component"), std::string::npos);
  EXPECT_NE(error_of(M, {"model.synthetic.preset.x=1"}).find("not a mapping"), std::string::npos);
}

TEST(Config, ResolvedYamlParsesBackToTheSameConfig) {
  const Config a = parse_config(
      M + "parallel: {tp: 4, ep: 4, moe: {dispatch: alltoall}}\nlaunch: {pdl: {sites: {gemv: off}}}\n", "x");
  const Config b = parse_config(config_to_yaml(a), "resolved");
  EXPECT_EQ(config_to_yaml(a), config_to_yaml(b));
  EXPECT_EQ(b.parallel.moe_dispatch, MoeDispatch::kAllToAll);
  // Every runtime switch away from its default survives the round trip under its own name.
  const Config c = parse_config(M + "runtime: {attention_split_keys: 96, moe_combine_batched_loads: false, "
                                    "staged_gemv_copy_groups: 3, moe_fused_norm: false, "
                                    "moe_one_token_direct: false, attention_tensor_cores: false, "
                                    "norm_loads_before_wait: false, moe_combine_early_routing: false, "
                                    "router_fused_max_tokens: 9, attention_fused_prologue: false, "
                                    "attention_inputs_before_wait: false, attention_kv_before_wait: false, "
                                    "router_fused_stores_after_gather: false, topk_gating_redux: false, "
                                    "topk_gating_by_logits: false, "
                                    "moe_gate_up_bulk_min_tokens: 3, moe_gate_up_bulk_stages: 5, "
                                    "staged_gemv_x_global: false, weights_l2_evict_first: false, "
                                    "staged_gemv_blocks_per_sm: 2, enable_prefix_caching: false}\n",
                                "x");
  const Config d = parse_config(config_to_yaml(c), "resolved");
  EXPECT_EQ(d.runtime.kernels.attention_split_keys, 96);
  EXPECT_FALSE(d.runtime.kernels.moe_combine_batched_loads);
  EXPECT_EQ(d.runtime.kernels.staged_gemv_copy_groups, 3);
  EXPECT_FALSE(d.runtime.kernels.moe_fused_norm);
  EXPECT_FALSE(d.runtime.kernels.moe_one_token_direct);
  EXPECT_FALSE(d.runtime.kernels.attention_tensor_cores);
  EXPECT_FALSE(d.runtime.kernels.norm_loads_before_wait);
  EXPECT_FALSE(d.runtime.kernels.moe_combine_early_routing);
  EXPECT_EQ(d.runtime.kernels.router_fused_max_tokens, 9);
  EXPECT_FALSE(d.runtime.kernels.attention_fused_prologue);
  EXPECT_FALSE(d.runtime.kernels.weights_l2_evict_first);
  EXPECT_FALSE(d.runtime.kernels.attention_inputs_before_wait);
  EXPECT_FALSE(d.runtime.kernels.attention_kv_before_wait);
  EXPECT_FALSE(d.runtime.kernels.router_fused_stores_after_gather);
  EXPECT_FALSE(d.runtime.kernels.topk_gating_redux);
  EXPECT_FALSE(d.runtime.kernels.topk_gating_by_logits);
  EXPECT_EQ(d.runtime.kernels.moe_gate_up_bulk_min_tokens, 3);
  EXPECT_EQ(d.runtime.kernels.moe_gate_up_bulk_stages, 5);
  EXPECT_FALSE(d.runtime.kernels.staged_gemv_x_global);
  EXPECT_EQ(d.runtime.kernels.staged_gemv_blocks_per_sm, 2);
  EXPECT_FALSE(d.runtime.enable_prefix_caching);
}

TEST(Config, LayoutValidationNeedsTheModelShape) {
  Config c = parse_config(M + "parallel: {tp: 4, ep: 4}\n", "x");
  LayoutFacts f{.num_attention_heads = 32,
                .num_key_value_heads = 4,
                .num_experts = 128,
                .moe_intermediate_size = 768,
                .vocab_size = 151936};
  EXPECT_NO_THROW(validate_layout(c, 4, f));
  f.num_attention_heads = 6;
  f.num_experts = 10;
  try {
    validate_layout(c, 4, f);
    FAIL();
  } catch (const ConfigError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("parallel.tp: 4 does not divide num_attention_heads=6"), std::string::npos) << msg;
    EXPECT_NE(msg.find("parallel.ep: 4 does not divide num_experts=10"), std::string::npos) << msg;
  }
  EXPECT_THROW(validate_layout(c, 2, f), ConfigError);  // tp != world size
  c = parse_config(M + "speculative: {method: mtp}\n", "x");
  EXPECT_THROW(validate_layout(c, 1, LayoutFacts{}), ConfigError);
}

// Every kernel switch (runtime/backend/cuda_kernel_switches.h) is a runtime.<name> key: set away from its
// default it changes the config and survives the resolved YAML, past its range it is refused, and it has a
// row in docs/config.md.
TEST(Config, EveryKernelSwitchIsAKeyWithADocsRow) {
  std::ifstream file(std::string(TPSERVE_SOURCE_DIR) + "/docs/config.md");
  ASSERT_TRUE(file) << "docs/config.md";
  const std::string docs((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  const std::string defaults = config_to_yaml(parse_config(M, "x"));
  int switches = 0;
  const CudaKernelSwitches fallbacks;
  for_each_kernel_switch(fallbacks, [&](const char* name, const auto& fallback, auto... range) {
    ++switches;
    const std::string key = std::string("runtime.") + name;
    EXPECT_NE(docs.find("| `" + key + "` |"), std::string::npos) << key << ": no row in docs/config.md";
    std::string value;
    if constexpr (sizeof...(range) == 0) {
      value = fallback ? "false" : "true";
      EXPECT_THROW(parse_config(M, "x", {key + "=2"}), ConfigError) << key;
    } else {
      const auto [lo, hi] = std::tuple{range...};
      value = std::to_string(fallback == lo ? hi : lo);
      EXPECT_THROW(parse_config(M, "x", {key + "=" + std::to_string(hi + 1)}), ConfigError) << key;
    }
    const std::string resolved = config_to_yaml(parse_config(M, "x", {key + "=" + value}));
    EXPECT_NE(resolved, defaults) << key << "=" << value << " changed nothing";
    EXPECT_NE(resolved.find(std::string(name) + ": " + value), std::string::npos) << resolved;
    EXPECT_EQ(config_to_yaml(parse_config(resolved, "resolved")), resolved) << key;
  });
  EXPECT_GT(switches, 0);
}

TEST(Config, EveryShippedConfigIsValid) {
  for (const char* name : {"tiny.yaml", "qwen3-30b-a3b.yaml", "qwen3-30b-a3b-tp2.yaml",
                           "qwen3-30b-a3b-tp4.yaml", "pdl-sites-example.yaml"}) {
    const std::string path = std::string(TPSERVE_SOURCE_DIR) + "/configs/" + name;
    EXPECT_NO_THROW(load_config_file(path)) << path;
  }
  EXPECT_THROW(load_config_file("/nonexistent/config.yaml"), ConfigError);
}

}  // namespace
}  // namespace tpserve
