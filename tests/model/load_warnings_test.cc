// What loading a checkpoint says about a config that does not fit it (CPU backend, a transformers fixture
// copied and edited): tensors the model does not use are named in a warning, a max_seq_len beyond the
// model's max_position_embeddings is warned about, and sizes beyond the checkpoint's fail naming a tensor.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/log.h"
#include "tests/model/mtp_fixture.h"

namespace tpserve {
namespace {

using namespace testing_util;

// The fixture in a temporary directory with its config.json edited by `edit`.
std::string edited_fixture(const std::string& fixture, const std::function<void(nlohmann::json&)>& edit) {
  namespace fs = std::filesystem;
  const std::string dir =
      (fs::temp_directory_path() / ("tpserve_edit_" + std::to_string(::getpid()))).string();
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const char* file : {"model.safetensors", "generation_config.json"})
    fs::copy_file(fixture_dir(fixture) + "/" + file, dir + "/" + file);
  nlohmann::json config = nlohmann::json::parse(std::ifstream(fixture_dir(fixture) + "/config.json"));
  edit(config);
  std::ofstream(dir + "/config.json") << config.dump(2);
  return dir;
}

// Standard error of building an engine on `config`.
std::string load_output(const Config& config) {
  set_log_level(LogLevel::kInfo);
  ::testing::internal::CaptureStderr();
  { EngineRun run(config); }
  return ::testing::internal::GetCapturedStderr();
}

TEST(LoadWarnings, TensorsTheModelDoesNotUseAreNamed) {
  int layers = 0;
  const std::string dir = edited_fixture("gqa4", [&](nlohmann::json& c) {
    layers = c["num_hidden_layers"].get<int>();
    c["num_hidden_layers"] = layers - 1;  // the checkpoint's last layer is left over
  });
  const std::string out = load_output(make_config("model: {path: " + dir + "}"));
  EXPECT_NE(
      out.find("unexpected tensors, not used by the model: model.layers." + std::to_string(layers - 1) + "."),
      std::string::npos)
      << out;
  EXPECT_EQ(load_output(fixture_config("gqa4")).find("unexpected tensors"), std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST(LoadWarnings, MaxSeqLenBeyondTheModelsPositions) {
  const std::string dir =
      edited_fixture("gqa4", [](nlohmann::json& c) { c["max_position_embeddings"] = 64; });
  const std::string out = load_output(make_config("model: {path: " + dir + "}"));  // max_seq_len 128
  EXPECT_NE(out.find("runtime.max_seq_len 128 is beyond the model's max_position_embeddings 64"),
            std::string::npos)
      << out;
  std::filesystem::remove_all(dir);
}

// A config whose sizes do not match the checkpoint fails naming the tensor before anything of that size is
// allocated (an expert size of 10^9 ended in a bare std::bad_alloc).
TEST(LoadWarnings, AConfigTooLargeForTheCheckpointNamesTheTensor) {
  const std::string dir =
      edited_fixture("gqa4", [](nlohmann::json& c) { c["moe_intermediate_size"] = 1000000000; });
  try {
    EngineRun run(make_config("model: {path: " + dir + "}"));
    ADD_FAILURE() << "loaded";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("mlp.experts."), std::string::npos) << what;
    EXPECT_NE(what.find("config.json implies"), std::string::npos) << what;
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tpserve
