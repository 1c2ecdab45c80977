// Checkpoint: opening a checkpoint directory (single file or sharded index) and reading through its shards.
#include "runtime/weights/checkpoint.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_set>

#include "common/error.h"
#include "common/log.h"
#include "runtime/weights/load_progress.h"

namespace tpserve {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) TPS_THROW(path, ": cannot open");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Shard names come from the index: plain relative paths inside the checkpoint directory only.
bool is_safe_shard_name(const std::string& name) {
  const fs::path p(name);
  if (name.empty() || p.is_absolute()) return false;
  for (const fs::path& part : p) {
    if (part == "..") return false;
  }
  return true;
}

}  // namespace

Checkpoint::Checkpoint(const std::string& dir) : dir_(dir) {
  std::error_code ec;
  if (!fs::exists(dir_, ec))
    TPS_THROW("checkpoint directory ", dir_, ec ? " cannot be read: " + ec.message() : " does not exist");
  if (!fs::is_directory(dir_, ec)) TPS_THROW("checkpoint path ", dir_, " is not a directory");
  const fs::path single = fs::path(dir_) / kSingleFile;
  const fs::path index = fs::path(dir_) / kIndexFile;
  // Both: one is stale (a folder written over), and which one the user means cannot be told.
  if (fs::exists(single, ec) && fs::exists(index, ec))
    TPS_THROW("checkpoint directory ", dir_, " has both ", kSingleFile, " and ", kIndexFile,
              ": one of them is left from another checkpoint; remove it");
  if (fs::exists(single, ec)) {
    shards_.push_back(std::make_unique<SafetensorsFile>(single.string()));
    add_shard_tensors();
  } else if (fs::exists(index, ec)) {
    open_sharded(index.string());
  } else {
    TPS_THROW("checkpoint directory ", dir_, " has neither ", kIndexFile, " nor ", kSingleFile);
  }
  log_debug(describe());
}

Checkpoint::~Checkpoint() = default;

void Checkpoint::open_sharded(const std::string& index_path) {
  json index;
  try {
    index = json::parse(read_text_file(index_path));
  } catch (const json::exception& e) {
    TPS_THROW(index_path, ": malformed JSON: ", e.what());
  }
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object()) {
    TPS_THROW(index_path,
              ": no \"weight_map\" object (expected {\"metadata\": {...}, \"weight_map\": {tensor: file}})");
  }

  std::map<std::string, std::vector<std::string>> tensors_by_shard;
  for (const auto& [tensor, file] : index["weight_map"].items()) {
    if (!file.is_string()) {
      TPS_THROW(index_path, ": weight_map entry for '", tensor, "' must be a file name (it is ",
                file.type_name(), ")");
    }
    tensors_by_shard[file.get<std::string>()].push_back(tensor);
  }

  for (const auto& [file, tensors] : tensors_by_shard) {
    if (!is_safe_shard_name(file)) {
      TPS_THROW(index_path, ": shard name '", file,
                "' must be a relative path inside the checkpoint directory");
    }
    const fs::path shard_path = fs::path(dir_) / file;
    std::error_code ec;
    if (!fs::exists(shard_path, ec)) {
      TPS_THROW(index_path, ": shard file ", file, " (holding '", tensors.front(), "' and ",
                tensors.size() - 1, " more tensors) is missing from ", dir_);
    }
    shards_.push_back(std::make_unique<SafetensorsFile>(shard_path.string()));
    add_shard_tensors();
    for (const std::string& tensor : tensors) {
      if (!shards_.back()->has(tensor)) {
        TPS_THROW(index_path, ": tensor '", tensor, "' is mapped to ", file, ", which does not contain it");
      }
    }
  }

  size_t unindexed = 0;
  std::string example;
  for (const auto& [tensor, shard] : tensor_shard_) {
    if (!index["weight_map"].contains(tensor)) {
      if (unindexed++ == 0) example = tensor;
    }
  }
  if (unindexed > 0) {
    log_warn(index_path, ": ", unindexed, " tensors of the shards are not in the weight_map (e.g. '", example,
             "'); they are used anyway");
  }
}

void Checkpoint::add_shard_tensors() {
  const SafetensorsFile* shard = shards_.back().get();
  for (const std::string& name : shard->names()) {
    const auto [it, inserted] = tensor_shard_.emplace(name, shard);
    if (!inserted) {
      TPS_THROW("checkpoint ", dir_, ": tensor '", name, "' is in two shards: ", it->second->path(), " and ",
                shard->path());
    }
  }
}

const SafetensorsFile& Checkpoint::shard_of(const std::string& name) const {
  const auto it = tensor_shard_.find(name);
  if (it == tensor_shard_.end()) TPS_THROW("tensor '", name, "' is not in checkpoint ", dir_);
  return *it->second;
}

bool Checkpoint::has(const std::string& name) const {
  return tensor_shard_.count(name) != 0;
}

TensorMeta Checkpoint::meta(const std::string& name) const {
  return shard_of(name).meta(name);
}

std::vector<std::string> Checkpoint::names() const {
  std::vector<std::string> out;
  out.reserve(tensor_shard_.size());
  for (const auto& [name, shard] : tensor_shard_) out.push_back(name);
  return out;
}

void Checkpoint::read(const std::string& name, std::span<const Range> ranges, DType out_dtype,
                      void* dst) const {
  shard_of(name).read(name, ranges, out_dtype, dst);
}

uint64_t Checkpoint::total_bytes() const {
  uint64_t total = 0;
  for (const auto& shard : shards_) total += shard->tensor_bytes();
  return total;
}

std::string Checkpoint::describe() const {
  std::ostringstream os;
  os << "checkpoint " << dir_ << " (" << shards_.size() << (shards_.size() == 1 ? " shard, " : " shards, ")
     << tensor_shard_.size() << " tensors, " << format_bytes(total_bytes()) << ")";
  return os.str();
}

void warn_unexpected_tensors(const WeightSource& source, const std::vector<std::string>& expected_names) {
  constexpr size_t kListed = 10;
  const std::unordered_set<std::string> expected(expected_names.begin(), expected_names.end());
  size_t count = 0;
  std::string listed;
  for (const std::string& name : source.names()) {
    if (expected.count(name) != 0) continue;
    if (count < kListed) listed += (count == 0 ? "" : ", ") + name;
    ++count;
  }
  if (count == 0) return;
  log_warn(source.describe(), ": ", count, " unexpected tensors, not used by the model: ", listed,
           count > kListed ? ", ... (" + std::to_string(count - kListed) + " more)" : std::string());
}

}  // namespace tpserve
