// config.json into a ModelSpec: a fixture's config parses; wrong types, null strings, integers beyond an int
// and deeply nested values give errors naming the field (no exception from the JSON library, no crash).
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "runtime/model/model_spec.h"
#include "runtime/model/weight_names.h"
#include "tests/model/model_test_util.h"

namespace tpserve {
namespace {

nlohmann::json fixture_config_json() {
  return nlohmann::json::parse(std::ifstream(testing_util::fixture_dir("gqa4") + "/config.json"));
}

std::string error_of(const nlohmann::json& config) {
  try {
    model_spec_from_json(config, "config.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ModelSpecJson, AFixturesConfigParses) {
  const ModelSpec s = model_spec_from_json(fixture_config_json(), "config.json");
  EXPECT_EQ(s.model_type, "qwen3_moe");
  EXPECT_GT(s.num_experts, 0);
}

TEST(ModelSpecJson, BadFieldsAreErrorsNamingThem) {
  auto with = [](const char* key, nlohmann::json value) {
    nlohmann::json c = fixture_config_json();
    c[key] = std::move(value);
    return c;
  };
  EXPECT_EQ(error_of(with("hidden_act", nullptr)), "");  // null is absent: silu
  EXPECT_NE(error_of(with("hidden_act", 5)).find("field 'hidden_act' must be a string, got 5"),
            std::string::npos);
  EXPECT_NE(error_of(with("model_type", nlohmann::json::array())).find("field 'model_type' must be a string"),
            std::string::npos);
  EXPECT_NE(error_of(with("num_experts_per_tok", int64_t(1) << 40))
                .find("'num_experts_per_tok' is 1099511627776, out of range"),
            std::string::npos);
  EXPECT_NE(error_of(with("eos_token_id", {1, int64_t(1) << 33}))
                .find("'eos_token_id' is 8589934592, out of range"),
            std::string::npos);
  EXPECT_NE(error_of(with("rope_scaling", {{"rope_type", "yarn"}, {"factor", 4.0}})).find("\"yarn\""),
            std::string::npos);
  // 100,000 levels, built in place and moved, never copied (a copy recurses as deep as the value).
  nlohmann::json deep;
  nlohmann::json* innermost = &deep;
  for (int i = 0; i < 100000; ++i) {
    *innermost = nlohmann::json::array();
    innermost->push_back(nullptr);
    innermost = &(*innermost)[0];
  }
  EXPECT_NE(error_of(with("rope_scaling", std::move(deep))).find("rope_scaling a list of 1 is not supported"),
            std::string::npos);
  nlohmann::json rp = {{"rope_type", nullptr}};
  EXPECT_EQ(error_of(with("rope_parameters", rp)), "");  // null rope_type: default
  // The legacy key "type" names the kind too (it was ignored: YaRN ran as plain RoPE).
  EXPECT_NE(error_of(with("rope_parameters", {{"type", "yarn"}, {"factor", 4.0}, {"rope_theta", 1e6}}))
                .find("rope_parameters type 'yarn' is not supported"),
            std::string::npos);
  EXPECT_NE(error_of(with("rope_scaling", {{"type", "linear"}, {"factor", 2.0}})).find("\"linear\""),
            std::string::npos);
  EXPECT_NE(error_of(with("rope_parameters", {{"full_attention", {{"rope_type", "default"}}}}))
                .find("rope_parameters.full_attention is a mapping"),
            std::string::npos);
  // Plain RoPE named in rope_scaling changes nothing: accepted.
  EXPECT_EQ(error_of(with("rope_scaling", {{"rope_type", "default"}})), "");
  EXPECT_EQ(error_of(with("rope_scaling", {{"type", "default"}})), "");
  // Values that ran and gave NaN logits, or built gigabytes of bookkeeping before a shape check.
  EXPECT_NE(error_of(with("rope_parameters", {{"rope_theta", 0}, {"rope_type", "default"}}))
                .find("rope_theta must be positive"),
            std::string::npos);
  nlohmann::json legacy = with("rope_theta", -5.0);
  legacy.erase("rope_parameters");
  EXPECT_NE(error_of(legacy).find("rope_theta must be positive"), std::string::npos);
  EXPECT_NE(error_of(with("rms_norm_eps", -1.0)).find("rms_norm_eps must be positive"), std::string::npos);
  EXPECT_NE(error_of(with("max_position_embeddings", 0)).find("max_position_embeddings must be positive"),
            std::string::npos);
  EXPECT_NE(error_of(with("num_experts", 3000000)).find("beyond what tpserve accepts"), std::string::npos);
  EXPECT_NE(error_of(with("num_hidden_layers", 100000)).find("beyond what tpserve accepts"),
            std::string::npos);
  EXPECT_NE(error_of(with("num_experts_per_tok", 0)).find("num_experts_per_tok must be at least 1"),
            std::string::npos);
  EXPECT_NE(error_of(with("moe_intermediate_size", 0)).find("moe_intermediate_size must be positive"),
            std::string::npos);
  EXPECT_NE(error_of(with("quantization_config", {{"quant_method", "fp8"}})).find("quantized checkpoints"),
            std::string::npos);
  EXPECT_EQ(error_of(with("quantization_config", nullptr)), "");
  EXPECT_NE(error_of(with("rope_parameters", "yarn")).find("rope_parameters \"yarn\" is not a mapping"),
            std::string::npos)
      << error_of(with("rope_parameters", "yarn"));
  // transformers 5 writes num_local_experts; a null num_experts beside it is absent.
  nlohmann::json local = with("num_experts", nullptr);
  local["num_local_experts"] = fixture_config_json()["num_experts"];
  EXPECT_EQ(error_of(local), "");
}

// num_parameters() is the sum of the checkpoint's tensors, also where the last layer is dense and there is an
// MTP head (always MoE when the model has experts: it was counted as the last layer's kind).
// generation_config.json: the sampling defaults a request without them gets (vLLM reads the same file),
// repetition_penalty among them; a penalty that is not > 0 is refused.
TEST(GenerationDefaults, ReadRepetitionPenaltyAndRefuseANonPositiveOne) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("tpserve_gencfg_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  EXPECT_EQ(load_generation_defaults(dir.string()).repetition_penalty, 1.0);  // no file
  auto write = [&](const std::string& text) { std::ofstream(dir / "generation_config.json") << text; };
  write(R"({"temperature": 0.6, "repetition_penalty": 1.05})");
  const GenerationDefaults g = load_generation_defaults(dir.string());
  EXPECT_DOUBLE_EQ(g.repetition_penalty, 1.05);
  EXPECT_DOUBLE_EQ(g.temperature, 0.6);
  write(R"({"repetition_penalty": 0})");
  EXPECT_THROW(load_generation_defaults(dir.string()), Error);
  write(R"({"repetition_penalty": "high"})");
  EXPECT_THROW(load_generation_defaults(dir.string()), Error);
  std::filesystem::remove_all(dir);
}

TEST(ModelSpec, ParameterCountIsTheSumOfTheTensors) {
  for (bool dense_last : {false, true}) {
    ModelSpec s = preset_model_spec("tiny", 0, 0);
    s.num_nextn_predict_layers = 1;
    if (dense_last) s.mlp_only_layers = {s.num_layers - 1};
    int64_t sum = 0;
    for (const ExpectedTensor& t : expected_tensors(s, ExpertLayout::kPerExpert)) {
      int64_t n = 1;
      for (int64_t d : t.shape) n *= d;
      sum += n;
    }
    EXPECT_EQ(s.num_parameters(), sum) << (dense_last ? "dense last layer" : "MoE last layer");
  }
}

}  // namespace
}  // namespace tpserve
