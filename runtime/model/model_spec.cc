#include "runtime/model/model_spec.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/error.h"

namespace tpserve {
namespace {

constexpr int kMaxLayers = 4096, kMaxExperts = 65536;

using json = nlohmann::json;

json read_json_file(const std::string& path) {
  std::ifstream in(path);
  TPS_CHECK(in.good(), path, ": cannot open");
  try {
    return json::parse(in);
  } catch (const json::exception& e) {
    TPS_THROW(path, ": malformed JSON: ", e.what());
  }
}

// A value for a message: scalars as written, lists and objects by kind (a dump recurses once a level, and a
// crafted file may nest deeply).
std::string describe(const json& v) {
  if (!v.is_structured()) return v.dump();
  // Small and one level deep (rope_scaling's {"rope_type": "yarn", "factor": 4.0}) is shown whole.
  const bool flat = std::none_of(v.begin(), v.end(), [](const json& e) { return e.is_structured(); });
  if (flat && v.size() <= 16) return v.dump();
  return (v.is_array() ? "a list of " : "an object of ") + std::to_string(v.size());
}

// An integer value that fits in an int, else an error naming the field.
int to_int(const json& v, const char* key, const std::string& src) {
  TPS_CHECK(v.is_number_integer(), src, ": field '", key, "' must be an integer, got ", describe(v));
  const int64_t x =
      v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX) ? INT64_MAX : v.get<int64_t>();
  TPS_CHECK(x >= INT32_MIN && x <= INT32_MAX, src, ": field '", key, "' is ", describe(v), ", out of range");
  return static_cast<int>(x);
}

// Reads an integer field; `required` fields throw when absent.
int get_int(const json& j, const char* key, const std::string& src, bool required, int fallback) {
  if (!j.contains(key) || j[key].is_null()) {
    TPS_CHECK(!required, src, ": missing required field '", key, "'");
    return fallback;
  }
  return to_int(j[key], key, src);
}

double get_double(const json& j, const char* key, const std::string& src, double fallback) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  TPS_CHECK(j[key].is_number(), src, ": field '", key, "' must be a number, got ", describe(j[key]));
  return j[key].get<double>();
}

bool get_bool(const json& j, const char* key, const std::string& src, bool fallback) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  TPS_CHECK(j[key].is_boolean(), src, ": field '", key, "' must be true or false, got ", describe(j[key]));
  return j[key].get<bool>();
}

std::string get_string(const json& j, const char* key, const std::string& src, const std::string& fallback) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  TPS_CHECK(j[key].is_string(), src, ": field '", key, "' must be a string, got ", describe(j[key]));
  return j[key].get<std::string>();
}

std::vector<int> get_int_or_list(const json& j, const char* key, const std::string& src) {
  std::vector<int> out;
  if (!j.contains(key) || j[key].is_null()) return out;
  if (j[key].is_number_integer()) return {to_int(j[key], key, src)};
  TPS_CHECK(j[key].is_array(), src, ": field '", key, "' must be an integer or a list of integers");
  for (const auto& v : j[key]) out.push_back(to_int(v, key, src));
  return out;
}

}  // namespace

bool ModelSpec::is_moe_layer(int layer) const {
  if (num_experts <= 0) return false;
  if (std::find(mlp_only_layers.begin(), mlp_only_layers.end(), layer) != mlp_only_layers.end()) return false;
  return (layer + 1) % decoder_sparse_step == 0;
}

int64_t ModelSpec::num_parameters() const {
  const int64_t h = hidden_size;
  const int64_t attn = h * (q_size() + 2 * kv_size()) + int64_t(q_size()) * h + 2 * head_dim + 2 * h;
  int64_t total = int64_t(vocab_size) * h * (tie_word_embeddings ? 1 : 2) + h;
  auto layer_params = [&](bool moe) {
    const int64_t mlp = moe ? int64_t(num_experts) * 3 * h * moe_intermediate_size + h * num_experts
                            : 3 * h * int64_t(intermediate_size);
    return attn + mlp;
  };
  for (int l = 0; l < num_layers; ++l) total += layer_params(is_moe_layer(l));
  // The MTP layer is MoE whenever the model has experts (weight_names.cc), whatever its last layer is.
  if (num_nextn_predict_layers > 0) total += 2 * h * h + 3 * h + layer_params(num_experts > 0);
  return total;
}

std::string ModelSpec::summary() const {
  std::ostringstream os;
  os << model_type << ": hidden " << hidden_size << ", layers " << num_layers << ", heads "
     << num_attention_heads << "/" << num_key_value_heads << " x " << head_dim << ", experts " << num_experts
     << " top-" << num_experts_per_tok << " x " << moe_intermediate_size << ", vocab " << vocab_size << ", "
     << static_cast<double>(num_parameters()) / 1e9 << "B params"
     << (num_nextn_predict_layers > 0 ? ", MTP head" : "");
  return os.str();
}

ModelSpec model_spec_from_json(const json& j, const std::string& src) {
  TPS_CHECK(j.is_object(), src, ": config.json must be a JSON object");
  ModelSpec s;
  const std::string type = get_string(j, "model_type", src, "");
  TPS_CHECK(type == "qwen3_moe", src, ": model_type '", type,
            "' is not supported (tpserve serves qwen3_moe; Qwen3MoeForCausalLM)");
  s.model_type = type;
  s.hidden_size = get_int(j, "hidden_size", src, true, 0);
  s.num_layers = get_int(j, "num_hidden_layers", src, true, 0);
  s.num_attention_heads = get_int(j, "num_attention_heads", src, true, 0);
  s.num_key_value_heads = get_int(j, "num_key_value_heads", src, false, s.num_attention_heads);
  s.head_dim = get_int(j, "head_dim", src, false,
                       s.num_attention_heads > 0 ? s.hidden_size / s.num_attention_heads : 0);
  s.vocab_size = get_int(j, "vocab_size", src, true, 0);
  s.intermediate_size = get_int(j, "intermediate_size", src, false, 0);
  s.moe_intermediate_size = get_int(j, "moe_intermediate_size", src, true, 0);
  // Hub files say num_experts; transformers 5.x writes num_local_experts.
  s.num_experts = j.contains("num_experts") && !j["num_experts"].is_null()
                      ? get_int(j, "num_experts", src, true, 0)
                      : get_int(j, "num_local_experts", src, true, 0);
  s.num_experts_per_tok = get_int(j, "num_experts_per_tok", src, true, 0);
  s.decoder_sparse_step = get_int(j, "decoder_sparse_step", src, false, 1);
  s.mlp_only_layers = get_int_or_list(j, "mlp_only_layers", src);
  s.norm_topk_prob = get_bool(j, "norm_topk_prob", src, false);
  s.rms_norm_eps = get_double(j, "rms_norm_eps", src, 1e-6);
  s.max_position_embeddings = get_int(j, "max_position_embeddings", src, false, 32768);
  s.tie_word_embeddings = get_bool(j, "tie_word_embeddings", src, false);
  s.bos_token_id = get_int(j, "bos_token_id", src, false, -1);
  s.eos_token_ids = get_int_or_list(j, "eos_token_id", src);
  s.num_nextn_predict_layers = get_int(j, "num_nextn_predict_layers", src, false, 0);

  // rope_theta (+ rope_scaling) on the hub; rope_parameters {rope_theta, rope_type} in transformers 5.x.
  // The kind is rope_type, or the legacy "type" (transformers reads both); only plain RoPE is implemented,
  // so any other kind is refused rather than run as plain RoPE with wrong positions.
  auto rope_kind = [&](const json& o, const std::string& where) {
    std::string kind = get_string(o, "rope_type", where, "");
    if (kind.empty()) kind = get_string(o, "type", where, "default");
    return kind;
  };
  s.rope_theta = get_double(j, "rope_theta", src, 10000.0);
  if (j.contains("rope_parameters") && !j["rope_parameters"].is_null() && !j["rope_parameters"].is_object())
    TPS_THROW(src, ": rope_parameters ", describe(j["rope_parameters"]), " is not a mapping");
  if (j.contains("rope_parameters") && j["rope_parameters"].is_object()) {
    const json& rp = j["rope_parameters"];
    const std::string where = src + " rope_parameters";
    for (const auto& [key, value] : rp.items())
      TPS_CHECK(
          !value.is_object(), src, ": rope_parameters.", key,
          " is a mapping (RoPE per layer type) and is not supported (one rope_parameters for all layers)");
    s.rope_theta = get_double(rp, "rope_theta", where, s.rope_theta);
    const std::string rope_type = rope_kind(rp, where);
    TPS_CHECK(rope_type == "default", src, ": rope_parameters type '", rope_type,
              "' is not supported (only plain RoPE: rope_type default)");
  }
  if (j.contains("rope_scaling") && !j["rope_scaling"].is_null()) {
    const json& rs = j["rope_scaling"];
    // A rope_scaling that names plain RoPE changes nothing (transformers runs it as rope_scaling: null).
    if (!rs.is_object() || rope_kind(rs, src + " rope_scaling") != "default")
      TPS_THROW(src, ": rope_scaling ", describe(rs),
                " is not supported (only plain RoPE: null or rope_type default)");
  }
  TPS_CHECK(!get_bool(j, "attention_bias", src, false), src, ": attention_bias true is not supported");
  const std::string act = get_string(j, "hidden_act", src, "silu");
  TPS_CHECK(act == "silu", src, ": hidden_act '", act, "' is not supported (silu only)");
  TPS_CHECK(!get_bool(j, "use_sliding_window", src, false), src,
            ": use_sliding_window true is not supported");

  TPS_CHECK(s.hidden_size > 0 && s.num_layers > 0 && s.num_attention_heads > 0 && s.num_key_value_heads > 0 &&
                s.head_dim > 0 && s.vocab_size > 0,
            src, ": sizes must be positive (hidden_size, num_hidden_layers, heads, head_dim, vocab_size)");
  TPS_CHECK(s.num_attention_heads % s.num_key_value_heads == 0, src, ": num_attention_heads ",
            s.num_attention_heads, " is not a multiple of num_key_value_heads ", s.num_key_value_heads);
  TPS_CHECK(s.head_dim % 2 == 0, src, ": head_dim ", s.head_dim, " must be even (RoPE)");
  TPS_CHECK(s.decoder_sparse_step >= 1, src, ": decoder_sparse_step must be >= 1");
  TPS_CHECK(s.num_experts >= 0 && s.num_experts_per_tok >= 0 && s.num_experts_per_tok <= s.num_experts, src,
            ": num_experts_per_tok ", s.num_experts_per_tok, " must be in [0, num_experts=", s.num_experts,
            "]");
  // Bounds far beyond any released model, so that a typo is an error here rather than gigabytes of
  // bookkeeping (or a bad_alloc) while the weights load.
  TPS_CHECK(s.num_layers <= kMaxLayers && s.num_experts <= kMaxExperts, src, ": num_hidden_layers ",
            s.num_layers, " / num_experts ", s.num_experts, " beyond what tpserve accepts (", kMaxLayers,
            " / ", kMaxExperts, ")");
  bool any_moe = false;
  for (int l = 0; l < s.num_layers; ++l) any_moe |= s.is_moe_layer(l);
  if (any_moe) {
    TPS_CHECK(s.num_experts_per_tok >= 1, src, ": num_experts_per_tok must be at least 1 for MoE layers");
    TPS_CHECK(s.moe_intermediate_size > 0, src, ": moe_intermediate_size must be positive, got ",
              s.moe_intermediate_size);
  }
  TPS_CHECK(std::isfinite(s.rope_theta) && s.rope_theta > 0, src, ": rope_theta must be positive, got ",
            s.rope_theta);
  TPS_CHECK(std::isfinite(s.rms_norm_eps) && s.rms_norm_eps > 0, src, ": rms_norm_eps must be positive, got ",
            s.rms_norm_eps);
  TPS_CHECK(s.max_position_embeddings > 0, src, ": max_position_embeddings must be positive, got ",
            s.max_position_embeddings);
  TPS_CHECK(!j.contains("quantization_config") || j["quantization_config"].is_null(), src,
            ": quantized checkpoints (quantization_config) are not supported: bf16, f16 or f32 weights only");
  bool any_dense = false;
  for (int l = 0; l < s.num_layers; ++l) any_dense |= !s.is_moe_layer(l);
  TPS_CHECK(!any_dense || s.intermediate_size > 0, src, ": intermediate_size is needed for dense MLP layers");
  for (int l : s.mlp_only_layers)
    TPS_CHECK(l >= 0 && l < s.num_layers, src, ": mlp_only_layers names layer ", l, " outside [0, ",
              s.num_layers, ")");
  TPS_CHECK(s.num_nextn_predict_layers >= 0 && s.num_nextn_predict_layers <= 1, src,
            ": num_nextn_predict_layers ", s.num_nextn_predict_layers, " is not supported (0 or 1)");
  return s;
}

ModelSpec load_model_spec(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / "config.json").string();
  std::error_code ec;  // the non-throwing overload: a permission error is a tpserve::Error too
  TPS_CHECK(std::filesystem::is_directory(dir, ec), "checkpoint directory '", dir,
            "' is not a readable directory", ec ? " (" + ec.message() + ")" : std::string());
  TPS_CHECK(std::filesystem::exists(path), dir, ": no config.json (not a Hugging Face checkpoint directory)");
  return model_spec_from_json(read_json_file(path), path);
}

json model_spec_to_json(const ModelSpec& s) {
  json j;
  j["architectures"] = {"Qwen3MoeForCausalLM"};
  j["model_type"] = s.model_type;
  j["hidden_size"] = s.hidden_size;
  j["num_hidden_layers"] = s.num_layers;
  j["num_attention_heads"] = s.num_attention_heads;
  j["num_key_value_heads"] = s.num_key_value_heads;
  j["head_dim"] = s.head_dim;
  j["vocab_size"] = s.vocab_size;
  j["intermediate_size"] = s.intermediate_size;
  j["moe_intermediate_size"] = s.moe_intermediate_size;
  j["num_experts"] = s.num_experts;
  j["num_experts_per_tok"] = s.num_experts_per_tok;
  j["decoder_sparse_step"] = s.decoder_sparse_step;
  j["mlp_only_layers"] = s.mlp_only_layers;
  j["norm_topk_prob"] = s.norm_topk_prob;
  j["rms_norm_eps"] = s.rms_norm_eps;
  j["rope_theta"] = s.rope_theta;
  j["rope_scaling"] = nullptr;
  j["max_position_embeddings"] = s.max_position_embeddings;
  j["tie_word_embeddings"] = s.tie_word_embeddings;
  j["attention_bias"] = false;
  j["hidden_act"] = "silu";
  j["torch_dtype"] = "bfloat16";
  if (s.bos_token_id >= 0) j["bos_token_id"] = s.bos_token_id;
  if (s.eos_token_ids.size() == 1)
    j["eos_token_id"] = s.eos_token_ids[0];
  else if (!s.eos_token_ids.empty())
    j["eos_token_id"] = s.eos_token_ids;
  if (s.num_nextn_predict_layers > 0) j["num_nextn_predict_layers"] = s.num_nextn_predict_layers;
  return j;
}

ModelSpec preset_model_spec(const std::string& preset, int layers, int vocab) {
  ModelSpec s;
  s.norm_topk_prob = true;
  s.rms_norm_eps = 1e-6;
  s.bos_token_id = 151643;
  s.eos_token_ids = {151645, 151643};
  if (preset == "tiny") {
    // Small enough for one CPU core at well under a second per token, with the real Qwen3 vocabulary so the
    // demo can speak text once the tokenizer is loaded.
    s.hidden_size = 64, s.num_layers = 2, s.num_attention_heads = 4, s.num_key_value_heads = 2,
    s.head_dim = 32;
    s.vocab_size = 151936, s.intermediate_size = 128, s.moe_intermediate_size = 32;
    s.num_experts = 8, s.num_experts_per_tok = 2;
    s.rope_theta = 1e6, s.max_position_embeddings = 4096;
  } else if (preset == "small") {
    s.hidden_size = 256, s.num_layers = 4, s.num_attention_heads = 8, s.num_key_value_heads = 2,
    s.head_dim = 64;
    s.vocab_size = 151936, s.intermediate_size = 512, s.moe_intermediate_size = 128;
    s.num_experts = 16, s.num_experts_per_tok = 4;
    s.rope_theta = 1e6, s.max_position_embeddings = 8192;
  } else if (preset == "qwen3-30b-a3b") {
    s.hidden_size = 2048, s.num_layers = 48, s.num_attention_heads = 32, s.num_key_value_heads = 4,
    s.head_dim = 128;
    s.vocab_size = 151936, s.intermediate_size = 6144, s.moe_intermediate_size = 768;
    s.num_experts = 128, s.num_experts_per_tok = 8;
    s.rope_theta = 1e6, s.max_position_embeddings = 40960;
  } else {
    TPS_THROW("unknown model preset '", preset, "' (tiny, small, qwen3-30b-a3b)");
  }
  if (layers > 0) s.num_layers = layers;
  if (vocab > 0) s.vocab_size = vocab;
  return s;
}

GenerationDefaults load_generation_defaults(const std::string& dir) {
  GenerationDefaults g;
  const std::string path = (std::filesystem::path(dir) / "generation_config.json").string();
  if (!std::filesystem::exists(path)) return g;
  const json j = read_json_file(path);
  TPS_CHECK(j.is_object(), path, ": must be a JSON object");
  g.present = true;
  const bool do_sample = get_bool(j, "do_sample", path, true);
  g.temperature = do_sample ? get_double(j, "temperature", path, 1.0) : 0.0;
  g.top_p = get_double(j, "top_p", path, 1.0);
  g.top_k = get_int(j, "top_k", path, false, 0);
  g.min_p = get_double(j, "min_p", path, 0.0);
  g.repetition_penalty = get_double(j, "repetition_penalty", path, 1.0);
  TPS_CHECK(g.repetition_penalty >= 1e-6 && g.repetition_penalty <= 1e6, path, ": repetition_penalty ",
            g.repetition_penalty, " must be in [1e-6, 1e6]");
  g.eos_token_ids = get_int_or_list(j, "eos_token_id", path);
  return g;
}

}  // namespace tpserve
