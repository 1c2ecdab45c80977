// Checkpoint: a Hugging Face checkpoint directory as a WeightSource. Either sharded
// (model.safetensors.index.json {"metadata": {...}, "weight_map": {tensor: file}} and its shard files) or a
// single model.safetensors (preferred when both exist, as transformers does). Every shard is opened
// (mmapped and validated) up front; the index and the shards must agree: each tensor of the weight_map is
// in the shard it names and no tensor is in two shards.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "runtime/weights/safetensors_file.h"
#include "runtime/weights/weight_source.h"

namespace tpserve {

class Checkpoint : public WeightSource {
 public:
  static constexpr const char* kIndexFile = "model.safetensors.index.json";
  static constexpr const char* kSingleFile = "model.safetensors";

  // Throws tpserve::Error naming the directory (and the file, shard or tensor) on any inconsistency.
  explicit Checkpoint(const std::string& dir);
  ~Checkpoint() override;

  bool has(const std::string& name) const override;
  TensorMeta meta(const std::string& name) const override;
  std::vector<std::string> names() const override;  // sorted
  void read(const std::string& name, std::span<const Range> ranges, DType out_dtype,
            void* dst) const override;
  // "checkpoint /path (3 shards, 1234 tensors, 5.6 MB)"
  std::string describe() const override;

  const std::string& dir() const { return dir_; }
  size_t num_shards() const { return shards_.size(); }
  size_t num_tensors() const { return tensor_shard_.size(); }
  uint64_t total_bytes() const;  // sum of tensor sizes over all shards
  // The shard holding `name` (throws like meta() when it is missing), for raw access to its bytes.
  const SafetensorsFile& shard_of(const std::string& name) const;

 private:
  void open_sharded(const std::string& index_path);
  // Maps every tensor of shards_.back() to it; throws when a tensor is already in another shard.
  void add_shard_tensors();

  std::string dir_;
  std::vector<std::unique_ptr<SafetensorsFile>> shards_;
  std::map<std::string, const SafetensorsFile*> tensor_shard_;
};

// Logs one warning when `source` holds tensors that are not in `expected_names` (count, and the first ~10
// names), e.g. an MTP head the config does not use or a misspelled checkpoint. Silent otherwise.
void warn_unexpected_tensors(const WeightSource& source, const std::vector<std::string>& expected_names);

}  // namespace tpserve
