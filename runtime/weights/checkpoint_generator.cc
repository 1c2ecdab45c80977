#include "runtime/weights/checkpoint_generator.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>

#include "common/error.h"
#include "common/log.h"
#include "runtime/model/weight_names.h"
#include "runtime/weights/load_progress.h"
#include "runtime/weights/safetensors_writer.h"
#include "runtime/weights/synthetic_weights.h"

namespace tpserve {
namespace {

void write_json(const std::filesystem::path& path, const nlohmann::json& j) {
  std::ofstream out(path);
  TPS_CHECK(out.good(), path.string(), ": cannot write");
  out << j.dump(2) << "\n";
  TPS_CHECK(out.good(), path.string(), ": write failed");
}

}  // namespace

int write_synthetic_checkpoint(const ModelSpec& spec, const std::string& out_dir,
                               const CheckpointGeneratorOptions& o) {
  namespace fs = std::filesystem;
  fs::create_directories(out_dir);
  // Shards of an earlier checkpoint would mix with this one's (or be loaded instead of it).
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(out_dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.ends_with(".safetensors") || name == "model.safetensors.index.json")
      TPS_THROW(out_dir, " already holds a checkpoint (", name,
                "): writing into it would mix two checkpoints' files; remove them or choose another --out");
  }
  TPS_CHECK(!ec, out_dir, ": cannot list: ", ec.message());
  const SyntheticWeights weights(spec, o.seed);
  const auto tensors = expected_tensors(spec, ExpertLayout::kPerExpert);

  // Shard assignment by size first, so that file names can say "of N".
  std::vector<int> shard_of(tensors.size());
  std::vector<uint64_t> shard_size{0};
  for (size_t i = 0; i < tensors.size(); ++i) {
    int64_t n = 1;
    for (int64_t d : tensors[i].shape) n *= d;
    const uint64_t bytes = static_cast<uint64_t>(n) * 2;
    if (shard_size.back() > 0 && shard_size.back() + bytes > o.shard_bytes) shard_size.push_back(0);
    shard_size.back() += bytes;
    shard_of[i] = static_cast<int>(shard_size.size()) - 1;
  }
  const int shards = static_cast<int>(shard_size.size());
  uint64_t total = 0;
  for (uint64_t s : shard_size) total += s;

  LoadProgress progress("writing " + out_dir, total, static_cast<int64_t>(tensors.size()));
  std::map<std::string, std::string> weight_map;
  std::vector<uint16_t> buffer;
  size_t next = 0;
  for (int s = 0; s < shards; ++s) {
    char name[64];
    std::snprintf(name, sizeof(name), "model-%05d-of-%05d.safetensors", s + 1, shards);
    SafetensorsWriter writer;
    for (; next < tensors.size() && shard_of[next] == s; ++next) {
      const auto& t = tensors[next];
      std::vector<Range> ranges;
      int64_t n = 1;
      for (int64_t d : t.shape) ranges.push_back({0, d}), n *= d;
      buffer.resize(static_cast<size_t>(n));
      weights.read(t.name, ranges, DType::kBF16, buffer.data());
      writer.add(t.name, DType::kBF16, t.shape, buffer.data(), buffer.size() * 2);
      weight_map[t.name] = name;
      progress.add(buffer.size() * 2);
    }
    writer.write((fs::path(out_dir) / name).string(), {{"format", "pt"}});
  }
  write_index_json(out_dir, weight_map, total);

  nlohmann::json config = model_spec_to_json(spec);
  write_json(fs::path(out_dir) / "config.json", config);
  nlohmann::json gen = {{"do_sample", true}, {"temperature", 0.6}, {"top_p", 0.95}, {"top_k", 20}};
  if (!spec.eos_token_ids.empty()) gen["eos_token_id"] = spec.eos_token_ids;
  if (spec.bos_token_id >= 0) gen["bos_token_id"] = spec.bos_token_id;
  write_json(fs::path(out_dir) / "generation_config.json", gen);
  if (!o.tokenizer.empty()) {
    TPS_CHECK(fs::exists(o.tokenizer), "tokenizer file '", o.tokenizer, "' does not exist");
    fs::copy_file(o.tokenizer, fs::path(out_dir) / "tokenizer.json", fs::copy_options::overwrite_existing);
  }
  log_info("wrote ", out_dir, ": ", spec.summary(), ", seed ", o.seed, ", ", shards, " shards");
  return shards;
}

}  // namespace tpserve
