// ModelSpec: every Qwen3-MoE hyper-parameter that changes the math, read from a Hugging Face config.json
// (both the hub spellings and transformers 5.x's), or from a named preset for synthetic models.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <string>
#include <vector>

namespace tpserve {

struct ModelSpec {
  std::string model_type = "qwen3_moe";
  int hidden_size = 0;
  int num_layers = 0;
  int num_attention_heads = 0;
  int num_key_value_heads = 0;
  int head_dim = 0;
  int vocab_size = 0;
  int intermediate_size = 0;      // dense MLP layers
  int moe_intermediate_size = 0;  // per expert
  int num_experts = 0;
  int num_experts_per_tok = 0;
  int decoder_sparse_step = 1;
  std::vector<int> mlp_only_layers;
  bool norm_topk_prob = false;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  int max_position_embeddings = 4096;
  bool tie_word_embeddings = false;
  int bos_token_id = -1;
  std::vector<int> eos_token_ids;
  int num_nextn_predict_layers = 0;  // MTP heads in the checkpoint (0 = none)

  bool is_moe_layer(int layer) const;
  int q_size() const { return num_attention_heads * head_dim; }
  int kv_size() const { return num_key_value_heads * head_dim; }
  // Parameters (elements) of the whole model, for logs and memory estimates.
  int64_t num_parameters() const;
  std::string summary() const;
};

// Throws tpserve::Error naming the file and the field for unsupported model types or values (rope_scaling
// other than null, attention_bias true, hidden_act other than silu, ...) and missing required fields.
ModelSpec model_spec_from_json(const nlohmann::json& config, const std::string& source);
ModelSpec load_model_spec(const std::string& checkpoint_dir);
nlohmann::json model_spec_to_json(const ModelSpec& spec);

// Presets for synthetic models: tiny (runs on one CPU core), small, qwen3-30b-a3b (the real shape).
// layers > 0 and vocab > 0 override the preset's values.
ModelSpec preset_model_spec(const std::string& preset, int layers = 0, int vocab = 0);

// Sampling defaults from generation_config.json (absent file or fields: none).
struct GenerationDefaults {
  double temperature = 1.0;
  double top_p = 1.0;
  int top_k = 0;
  double min_p = 0.0;
  double repetition_penalty = 1.0;
  std::vector<int> eos_token_ids;
  bool present = false;
};
GenerationDefaults load_generation_defaults(const std::string& checkpoint_dir);

}  // namespace tpserve
