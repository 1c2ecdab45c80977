#include "runtime/config/config_parser.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

namespace tpserve {
namespace {

using Problems = std::vector<std::string>;

std::string join(const std::vector<std::string>& items, const char* sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? sep : "") + items[i];
  return out;
}

std::string describe(const YAML::Node& node) {
  if (!node.IsDefined() || node.IsNull()) return "null";
  if (node.IsScalar()) return "'" + node.Scalar() + "'";
  if (node.IsSequence()) return "a list";
  return "a mapping";
}

std::string child_path(const std::string& path, const std::string& key) {
  return path.empty() ? key : path + "." + key;
}

// One mapping of the document: checks that it is a mapping, rejects unknown keys and reads typed fields.
class Section {
 public:
  Section(const YAML::Node& node, std::string path, Problems& problems, std::vector<std::string> keys)
      : node_(node), path_(std::move(path)), problems_(problems) {
    if (!node_.IsDefined() || node_.IsNull()) {
      ok_ = false;  // absent section: defaults
      return;
    }
    if (!node_.IsMap()) {
      problems_.push_back(path_ + ": expected a mapping of " + join(keys, ", ") + ", got " + describe(node_));
      ok_ = false;
      return;
    }
    std::vector<std::string> seen;
    for (const auto& kv : node_) {
      const std::string key = kv.first.Scalar();
      // yaml-cpp keeps a repeated key and answers lookups with its first value: the later one would be lost.
      if (std::find(seen.begin(), seen.end(), key) != seen.end()) {
        problems_.push_back(child_path(path_, key) + ": given more than once");
        continue;
      }
      seen.push_back(key);
      if (std::find(keys.begin(), keys.end(), key) != keys.end()) continue;
      std::string msg = child_path(path_, key) + ": unknown key";
      const std::string guess = did_you_mean(key, keys);
      if (!guess.empty()) msg += " (did you mean '" + guess + "'?)";
      msg += "; allowed keys of " + (path_.empty() ? std::string("the top level") : path_) + ": " +
             join(keys, ", ");
      problems_.push_back(msg);
    }
  }

  bool present(const std::string& key) const { return ok_ && node_[key].IsDefined() && !node_[key].IsNull(); }
  // A scalar key given a value. `key:` with nothing after it (YAML null, also `--set key=`) is a problem
  // rather than the default: it is a value left out, not one asked for. (Sections may be null: defaults.)
  bool value_given(const std::string& key) {
    if (!ok_ || !node_[key].IsDefined()) return false;
    if (node_[key].IsNull()) {
      problems_.push_back(path(key) + ": no value given (leave the key out for its default)");
      return false;
    }
    return true;
  }
  YAML::Node node(const std::string& key) const { return ok_ ? node_[key] : YAML::Node(); }
  std::string path(const std::string& key) const { return child_path(path_, key); }

  void integer(const std::string& key, int& out, long lo, long hi) {
    if (!value_given(key)) return;
    const YAML::Node v = node_[key];
    long value = 0;
    if (!parse_integer(v, value)) {
      bad(key, v, "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
      return;
    }
    if (value < lo || value > hi) {
      bad(key, v, "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
      return;
    }
    out = static_cast<int>(value);
  }

  void unsigned64(const std::string& key, uint64_t& out) {
    if (!value_given(key)) return;
    const YAML::Node v = node_[key];
    long value = 0;
    if (!parse_integer(v, value) || value < 0) {
      bad(key, v, "a non-negative integer");
      return;
    }
    out = static_cast<uint64_t>(value);
  }

  void real(const std::string& key, double& out, double lo, double hi, bool lo_open) {
    if (!value_given(key)) return;
    const YAML::Node v = node_[key];
    double value = 0;
    const std::string range = std::string(lo_open ? "(" : "[") + format(lo) + ", " + format(hi) + "]";
    try {
      if (!v.IsScalar()) throw YAML::Exception(YAML::Mark::null_mark(), "");
      value = v.as<double>();
    } catch (const YAML::Exception&) {
      bad(key, v, "a number in " + range);
      return;
    }
    if (!std::isfinite(value) || value > hi || value < lo || (lo_open && value == lo)) {
      bad(key, v, "a number in " + range);
      return;
    }
    out = value;
  }

  void boolean(const std::string& key, bool& out) {
    if (!value_given(key)) return;
    const YAML::Node v = node_[key];
    const std::string s = v.IsScalar() ? v.Scalar() : "";
    if (s == "true")
      out = true;
    else if (s == "false")
      out = false;
    else
      bad(key, v, "true or false");
  }

  void text(const std::string& key, std::string& out, bool allow_empty = true) {
    if (!value_given(key)) return;
    const YAML::Node v = node_[key];
    if (!v.IsScalar() || (!allow_empty && v.Scalar().empty())) {
      bad(key, v, allow_empty ? "a string" : "a non-empty string");
      return;
    }
    out = v.Scalar();
  }

  template <typename Enum>
  void choice(const std::string& key, Enum& out, const std::vector<std::pair<std::string, Enum>>& options) {
    if (!value_given(key)) return;
    const YAML::Node v = node_[key];
    std::vector<std::string> names;
    for (const auto& [name, value] : options) {
      names.push_back(name);
      if (v.IsScalar() && v.Scalar() == name) {
        out = value;
        return;
      }
    }
    bad(key, v, "one of " + join(names, "|"));
  }

  void bad(const std::string& key, const YAML::Node& v, const std::string& allowed) {
    problems_.push_back(path(key) + ": got " + describe(v) + ", expected " + allowed);
  }

  static bool parse_integer(const YAML::Node& v, long& out) {
    if (!v.IsScalar()) return false;
    const std::string& s = v.Scalar();
    if (s.empty()) return false;
    size_t pos = 0;
    try {
      out = std::stol(s, &pos, 10);
    } catch (const std::exception&) {
      return false;
    }
    return pos == s.size();
  }

  static std::string format(double v) {
    std::ostringstream os;
    os << v;
    return os.str();
  }

 private:
  YAML::Node node_;
  std::string path_;
  Problems& problems_;
  bool ok_ = true;
};

void read_model(const YAML::Node& root, Config& c, Problems& p) {
  Section s(root["model"], "model", p, {"path", "synthetic", "tokenizer", "served_name"});
  s.text("path", c.model.path, false);
  s.text("tokenizer", c.model.tokenizer, false);
  s.text("served_name", c.model.served_name, false);
  if (s.present("synthetic")) {
    SyntheticModelConfig syn;
    Section y(s.node("synthetic"), "model.synthetic", p, {"preset", "seed", "layers", "vocab", "mtp"});
    y.text("preset", syn.preset, false);
    if (syn.preset != "tiny" && syn.preset != "small" && syn.preset != "qwen3-30b-a3b")
      y.bad("preset", y.node("preset"), "one of tiny|small|qwen3-30b-a3b");
    y.unsigned64("seed", syn.seed);
    y.integer("layers", syn.layers, 0, 1024);
    y.integer("vocab", syn.vocab, 0, 1 << 22);
    y.boolean("mtp", syn.mtp);
    c.model.synthetic = syn;
  }
  if (!c.model.path.empty() && c.model.synthetic)
    p.push_back("model: give either model.path or model.synthetic, not both");
  if (c.model.path.empty() && !c.model.synthetic)
    p.push_back("model: missing model.path (checkpoint directory) or model.synthetic {preset, seed, layers}");
}

void read_parallel(const YAML::Node& root, Config& c, Problems& p) {
  Section s(root["parallel"], "parallel", p, {"tp", "ep", "moe", "all_reduce"});
  s.choice<AllReduceImpl>("all_reduce", c.parallel.all_reduce,
                          {{"auto", AllReduceImpl::kAuto},
                           {"nccl", AllReduceImpl::kNccl},
                           {"one_shot", AllReduceImpl::kOneShot}});
  s.integer("tp", c.parallel.tp, 1, 1024);
  s.integer("ep", c.parallel.ep, 1, 1024);
  Section m(s.node("moe"), "parallel.moe", p, {"parallel", "dispatch"});
  m.choice<MoeParallel>("parallel", c.parallel.moe_parallel,
                        {{"tp", MoeParallel::kTp}, {"ep", MoeParallel::kEp}});
  m.choice<MoeDispatch>("dispatch", c.parallel.moe_dispatch,
                        {{"allreduce", MoeDispatch::kAllReduce}, {"alltoall", MoeDispatch::kAllToAll}});
  if (!m.present("parallel") && c.parallel.ep > 1) c.parallel.moe_parallel = MoeParallel::kEp;
  if (c.parallel.ep > 1 && c.parallel.moe_parallel == MoeParallel::kTp)
    p.push_back("parallel.moe.parallel: 'tp' contradicts parallel.ep=" + std::to_string(c.parallel.ep) +
                " (expert parallelism needs parallel.moe.parallel: ep)");
  if (c.parallel.moe_dispatch == MoeDispatch::kAllToAll && c.parallel.moe_parallel != MoeParallel::kEp)
    p.push_back("parallel.moe.dispatch: 'alltoall' needs parallel.moe.parallel: ep");
}

void read_runtime(const YAML::Node& root, Config& c, Problems& p) {
  std::vector<std::string> keys{"backend",
                                "max_batch",
                                "max_seq_len",
                                "kv_block_size",
                                "gpu_memory_fraction",
                                "num_kv_blocks",
                                "max_num_batched_tokens",
                                "sampling_candidates",
                                "enable_prefix_caching"};
  for_each_kernel_switch(c.runtime.kernels, [&](const char* name, auto&&...) { keys.emplace_back(name); });
  Section s(root["runtime"], "runtime", p, std::move(keys));
  s.choice<BackendKind>(
      "backend", c.runtime.backend,
      {{"auto", BackendKind::kAuto}, {"cpu", BackendKind::kCpu}, {"cuda", BackendKind::kCuda}});
  s.integer("max_batch", c.runtime.max_batch, 1, 4096);
  s.integer("max_seq_len", c.runtime.max_seq_len, 2, 1 << 22);
  s.integer("kv_block_size", c.runtime.kv_block_size, 1, 1024);
  s.real("gpu_memory_fraction", c.runtime.gpu_memory_fraction, 0.0, 1.0, true);
  s.integer("num_kv_blocks", c.runtime.num_kv_blocks, 0, 1 << 30);
  s.integer("max_num_batched_tokens", c.runtime.max_num_batched_tokens, 1, 1 << 20);
  s.integer("sampling_candidates", c.runtime.sampling_candidates, 1, 4096);
  s.boolean("enable_prefix_caching", c.runtime.enable_prefix_caching);
  for_each_kernel_switch(c.runtime.kernels, [&](const char* name, auto& field, auto... range) {
    if constexpr (sizeof...(range) == 0)
      s.boolean(name, field);
    else
      s.integer(name, field, range...);
  });
  if (c.runtime.kernels.attention_split_keys % 16 != 0)
    p.push_back("runtime.attention_split_keys: got " +
                std::to_string(c.runtime.kernels.attention_split_keys) + ", must be a multiple of 16");
  for (const auto& [name, cols] :
       {std::pair{"moe_gate_up_bulk_cols", c.runtime.kernels.moe_gate_up_bulk_cols},
        std::pair{"moe_gate_up_bulk_cols_one_token", c.runtime.kernels.moe_gate_up_bulk_cols_one_token}})
    if (cols != 256 && cols != 512)
      p.push_back(std::string("runtime.") + name + ": got " + std::to_string(cols) + ", expected 256 or 512");
  if (c.runtime.max_num_batched_tokens < c.runtime.max_batch)
    p.push_back("runtime.max_num_batched_tokens: got " + std::to_string(c.runtime.max_num_batched_tokens) +
                ", must be at least runtime.max_batch=" + std::to_string(c.runtime.max_batch));
  const int bs = c.runtime.kv_block_size;
  if (bs > 0 && (bs & (bs - 1)) != 0)
    p.push_back("runtime.kv_block_size: got " + std::to_string(bs) + ", expected a power of two");
}

void read_cuda_graph(const YAML::Node& root, Config& c, Problems& p) {
  Section s(root["cuda_graph"], "cuda_graph", p, {"enabled", "capture_sizes"});
  s.boolean("enabled", c.cuda_graph.enabled);
  if (!s.value_given("capture_sizes")) return;
  const YAML::Node list = s.node("capture_sizes");
  if (!list.IsSequence() || list.size() == 0) {
    s.bad("capture_sizes", list, "a non-empty list of batch sizes, e.g. [1, 2, 4, 8]");
    return;
  }
  std::vector<int> sizes;
  for (size_t i = 0; i < list.size(); ++i) {
    long v = 0;
    const std::string item = s.path("capture_sizes") + "[" + std::to_string(i) + "]";
    if (!Section::parse_integer(list[i], v) || v < 1 || v > c.runtime.max_batch) {
      p.push_back(item + ": got " + describe(list[i]) + ", expected an integer in [1, runtime.max_batch=" +
                  std::to_string(c.runtime.max_batch) + "]");
      continue;
    }
    sizes.push_back(static_cast<int>(v));
  }
  std::sort(sizes.begin(), sizes.end());
  if (std::adjacent_find(sizes.begin(), sizes.end()) != sizes.end())
    p.push_back(s.path("capture_sizes") + ": contains a batch size twice");
  c.cuda_graph.capture_sizes = sizes;
}

void read_launch(const YAML::Node& root, Config& c, Problems& p) {
  Section s(root["launch"], "launch", p, {"pdl"});
  Section pdl(s.node("pdl"), "launch.pdl", p, {"default", "sites"});
  const std::vector<std::pair<std::string, kernels::PdlMode>> modes = {
      {"auto", kernels::PdlMode::kAuto}, {"on", kernels::PdlMode::kOn}, {"off", kernels::PdlMode::kOff}};
  pdl.choice<kernels::PdlMode>("default", c.launch.pdl.default_mode, modes);
  if (!pdl.present("sites")) return;
  std::vector<std::string> names(kernels::site_names().begin(), kernels::site_names().end());
  Section sites(pdl.node("sites"), "launch.pdl.sites", p, names);
  for (const auto& name : names) {
    kernels::PdlMode mode{};
    if (!sites.value_given(name)) continue;
    const size_t before = p.size();
    sites.choice<kernels::PdlMode>(name, mode, modes);
    if (p.size() == before) c.launch.pdl.sites[static_cast<int>(*kernels::site_from_name(name))] = mode;
  }
}

void read_speculative(const YAML::Node& root, Config& c, Problems& p) {
  Section s(root["speculative"], "speculative", p, {"method", "num_speculative_tokens"});
  s.choice<SpeculativeMethod>("method", c.speculative.method,
                              {{"none", SpeculativeMethod::kNone}, {"mtp", SpeculativeMethod::kMtp}});
  s.integer("num_speculative_tokens", c.speculative.num_speculative_tokens, 0, 4);
  if (c.speculative.method == SpeculativeMethod::kMtp) {
    if (!s.present("num_speculative_tokens")) c.speculative.num_speculative_tokens = 1;
    if (c.speculative.num_speculative_tokens < 1)
      p.push_back("speculative.num_speculative_tokens: got 0, expected 1..4 with speculative.method: mtp");
  } else if (c.speculative.num_speculative_tokens > 0) {
    p.push_back("speculative.num_speculative_tokens: got " +
                std::to_string(c.speculative.num_speculative_tokens) +
                " but speculative.method is none (set method: mtp)");
  }
}

void read_server(const YAML::Node& root, Config& c, Problems& p) {
  ServerConfig& v = c.server;
  const YAML::Node server = root["server"];
  const bool literal_key = server.IsDefined() && server.IsMap() && server["api_key"].IsDefined();
  if (literal_key)
    p.push_back(
        "server.api_key: a key is never written in a config file (nor given with --set, which `ps` shows): "
        "put it in a file and set server.api_key_file, or set TPSERVE_API_KEY in the environment");
  auto keys = [literal_key](std::vector<std::string> k) {
    if (literal_key) k.push_back("api_key");  // reported above, not again as an unknown key
    return k;
  };
  Section s(server, "server", p,
            keys({"host", "port", "threads", "api_key_file", "max_connections", "max_queued_requests",
                  "max_body_bytes", "max_prompt_tokens", "max_output_tokens", "max_stop_sequences",
                  "max_stop_string_bytes", "reasoning_parser", "tool_call_parser", "idle_timeout_s",
                  "request_timeout_s", "write_timeout_s"}));
  s.text("host", v.host, false);
  s.integer("port", v.port, 0, 65535);
  s.integer("threads", v.threads, 0, kMaxServerThreads);
  s.text("api_key_file", v.api_key_file, false);
  s.integer("max_connections", v.max_connections, 0, 1 << 20);
  s.integer("max_queued_requests", v.max_queued_requests, 1, 1 << 20);
  s.integer("max_body_bytes", v.max_body_bytes, 1024, 1 << 30);
  s.integer("max_prompt_tokens", v.max_prompt_tokens, 0, 1 << 30);
  s.integer("max_output_tokens", v.max_output_tokens, 0, 1 << 30);
  s.integer("max_stop_sequences", v.max_stop_sequences, 1, 1 << 16);
  s.integer("max_stop_string_bytes", v.max_stop_string_bytes, 1, 1 << 20);
  s.choice<ReasoningParser>("reasoning_parser", v.reasoning_parser,
                            {{"none", ReasoningParser::kNone}, {"qwen3", ReasoningParser::kQwen3}});
  s.choice<ToolCallParser>("tool_call_parser", v.tool_call_parser,
                           {{"none", ToolCallParser::kNone}, {"hermes", ToolCallParser::kHermes}});
  // The HTTP server's timeouts are whole milliseconds (at least one: zero would time every connection out).
  s.real("idle_timeout_s", v.idle_timeout_s, 0.001, 86400, false);
  s.real("request_timeout_s", v.request_timeout_s, 0.001, 86400, false);
  s.real("write_timeout_s", v.write_timeout_s, 0.001, 86400, false);
  if (v.threads == 0)  // auto (read_runtime ran first)
    v.threads = static_cast<int>(std::min<int64_t>(
        kMaxServerThreads, int64_t(c.runtime.max_batch) + v.max_queued_requests + kAutoThreadsSpare));
  if (v.max_connections == 0) v.max_connections = v.threads + kAutoIdleConnections;  // auto
}

void read_logging(const YAML::Node& root, Config& c, Problems& p) {
  Section s(root["logging"], "logging", p, {"level"});
  s.choice<LogLevel>("level", c.logging.level,
                     {{"debug", LogLevel::kDebug},
                      {"info", LogLevel::kInfo},
                      {"warn", LogLevel::kWarn},
                      {"error", LogLevel::kError},
                      {"off", LogLevel::kOff}});
}

// Applies "a.b.c=value" to the YAML tree; value is parsed as YAML (so 2, true, [1,2] keep their types).
void apply_override(YAML::Node& root, const std::string& assignment, Problems& p) {
  const size_t eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0) {
    p.push_back("--set '" + assignment + "': expected key.path=value");
    return;
  }
  const std::string path = assignment.substr(0, eq);
  YAML::Node value;
  const std::string text = assignment.substr(eq + 1);
  try {
    value = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    p.push_back("--set " + path + ": value is not valid YAML: " + e.msg);
    return;
  }
  // A command line has no comments: "team model #2" is the whole string, not "team model" (YAML's comment
  // is a # at the start or after a space, outside quotes).
  const size_t hash = text.find(" #");
  const bool quoted = !text.empty() && (text[0] == '\'' || text[0] == '"');
  if ((value.IsScalar() || value.IsNull()) && !quoted &&
      (hash != std::string::npos || text.rfind('#', 0) == 0))
    value = YAML::Node(text);
  std::vector<std::string> parts;
  std::stringstream ss(path);
  for (std::string part; std::getline(ss, part, '.');) {
    if (part.empty()) {
      p.push_back("--set '" + assignment + "': empty component in key path");
      return;
    }
    parts.push_back(part);
  }
  // yaml-cpp nodes are handles: walk with copies that reference the same tree.
  std::vector<YAML::Node> chain{root};
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    YAML::Node next = chain.back()[parts[i]];
    if (next.IsDefined() && !next.IsNull() && !next.IsMap()) {
      p.push_back("--set " + path + ": '" + parts[i] + "' is not a mapping");
      return;
    }
    chain.push_back(next);
  }
  chain.back()[parts.back()] = value;
}

}  // namespace

ConfigError::ConfigError(std::vector<std::string> problems)
    : Error("invalid config:\n  " + join(problems, "\n  ")), problems_(std::move(problems)) {}

std::string did_you_mean(const std::string& key, const std::vector<std::string>& candidates) {
  auto distance = [](const std::string& a, const std::string& b) {
    std::vector<size_t> row(b.size() + 1);
    for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
    for (size_t i = 1; i <= a.size(); ++i) {
      size_t diag = row[0];
      row[0] = i;
      for (size_t j = 1; j <= b.size(); ++j) {
        const size_t up = row[j];
        row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
        diag = up;
      }
    }
    return row[b.size()];
  };
  std::string best;
  size_t best_d = std::max<size_t>(2, key.size() / 3) + 1;
  for (const auto& c : candidates) {
    size_t d = distance(key, c);
    if (key.size() >= 3 && c.rfind(key, 0) == 0) d = std::min<size_t>(d, 1);
    if (d < best_d) best_d = d, best = c;
  }
  return best;
}

Config parse_config(const std::string& text, const std::string& source,
                    const std::vector<std::string>& overrides) {
  YAML::Node root;
  try {
    std::vector<YAML::Node> documents = YAML::LoadAll(text);
    if (documents.size() > 1)
      throw ConfigError({source + ": " + std::to_string(documents.size()) +
                         " YAML documents (separated by ---); a config is one document"});
    if (!documents.empty()) root = documents.front();
  } catch (const YAML::Exception& e) {
    throw ConfigError({source + ": YAML syntax error at line " + std::to_string(e.mark.line + 1) +
                       ", column " + std::to_string(e.mark.column + 1) + ": " + e.msg});
  }
  if (!root.IsDefined() || root.IsNull()) root = YAML::Node(YAML::NodeType::Map);
  Problems p;
  if (!root.IsMap())
    throw ConfigError({source + ": the top level must be a mapping of sections, got " + describe(root)});
  for (const auto& o : overrides) apply_override(root, o, p);

  Config c;
  c.source = source;
  Section top(root, "", p,
              {"model", "parallel", "runtime", "cuda_graph", "launch", "speculative", "server", "logging"});
  read_model(root, c, p);
  read_parallel(root, c, p);
  read_runtime(root, c, p);
  read_cuda_graph(root, c, p);
  read_launch(root, c, p);
  read_speculative(root, c, p);
  read_server(root, c, p);
  read_logging(root, c, p);
  if (!p.empty()) throw ConfigError(std::move(p));
  return c;
}

Config load_config_file(const std::string& path, const std::vector<std::string>& overrides) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw ConfigError({path + ": is a directory; --config takes a YAML file (e.g. configs/tiny.yaml)"});
  std::ifstream in(path);
  if (!in) throw ConfigError({path + ": cannot open config file"});
  std::stringstream buffer;
  buffer << in.rdbuf();
  return parse_config(buffer.str(), path, overrides);
}

}  // namespace tpserve
