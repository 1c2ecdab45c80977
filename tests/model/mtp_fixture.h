// MTP tests: checkpoints with an MTP head (a transformers fixture plus a synthetic mtp.* head of its shape),
// CPU engines and KV-cache reads.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "parallel/communicator.h"
#include "runtime/engine/engine.h"
#include "runtime/model/model_spec.h"
#include "runtime/weights/checkpoint.h"
#include "runtime/weights/safetensors_writer.h"
#include "runtime/weights/synthetic_weights.h"
#include "tests/model/model_test_util.h"

namespace tpserve::testing_util {

// An engine on the CPU backend with a communicator of one.
struct EngineRun {
  std::unique_ptr<parallel::Communicator> comm = parallel::make_single_rank_communicator();
  std::unique_ptr<Engine> engine;
  explicit EngineRun(const Config& config, EngineOptions options = {}) {
    engine = std::make_unique<Engine>(config, *comm, make_cpu_backend(), std::move(options));
  }
};

// The first n positions of a KV cache layer (one sequence in blocks 0, 1, ...: slot == position).
inline std::vector<float> kv_positions(KvCacheLayer c, int n) {
  std::vector<float> out;
  for (Tensor t : {c.k, c.v}) {
    const int64_t per_slot = t.dim(2) * t.dim(3);
    out.insert(out.end(), t.ptr<float>(), t.ptr<float>() + n * per_slot);
  }
  return out;
}

// A transformers fixture plus a synthetic MTP head of its shape, as a two-shard checkpoint.
inline std::string fixture_with_mtp(const std::string& fixture) {
  namespace fs = std::filesystem;
  const std::string dir =
      (fs::temp_directory_path() / ("tpserve_mtp_" + fixture + std::to_string(::getpid()))).string();
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string src = fixture_dir(fixture);
  fs::copy_file(src + "/model.safetensors", dir + "/model-00001-of-00002.safetensors");
  fs::copy_file(src + "/generation_config.json", dir + "/generation_config.json");
  nlohmann::json config = nlohmann::json::parse(std::ifstream(src + "/config.json"));
  config["num_nextn_predict_layers"] = 1;
  std::ofstream(dir + "/config.json") << config.dump(2);
  const ModelSpec spec = load_model_spec(dir);
  SyntheticWeights head(spec, 77);
  SafetensorsWriter writer;
  std::map<std::string, std::string> weight_map;
  for (const auto& name : Checkpoint(src).names()) weight_map[name] = "model-00001-of-00002.safetensors";
  for (const auto& name : head.names()) {
    if (name.rfind("mtp.", 0) != 0) continue;
    const std::vector<float> v = head.read_all_f32(name);
    writer.add(name, DType::kF32, head.meta(name).shape, v.data(), v.size() * sizeof(float));
    weight_map[name] = "model-00002-of-00002.safetensors";
  }
  writer.write(dir + "/model-00002-of-00002.safetensors");
  write_index_json(dir, weight_map, 0);
  return dir;
}

}  // namespace tpserve::testing_util
