// SafetensorsFile: one .safetensors file, mmapped read-only. The constructor validates the whole header
// (length, JSON, every entry's dtype, shape and offsets, sizes, overlaps, __metadata__) and throws
// tpserve::Error naming the file (and the tensor) on the first problem, so that nothing later has to
// distrust the offsets. Tensor bytes are read straight from the mapping; the file is never copied whole.
//
// Format: 8-byte little-endian header length N, N bytes of JSON
// {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {str: str}}, then the data
// section; offsets are relative to its start.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "runtime/weights/weight_source.h"

namespace tpserve {

class SafetensorsFile {
 public:
  // Headers larger than this are refused as corrupt (the reference implementation uses the same bound).
  static constexpr uint64_t kMaxHeaderBytes = 100'000'000;

  explicit SafetensorsFile(std::string path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  uint64_t file_size() const { return file_size_; }
  // Sum of the byte sizes of all tensors.
  uint64_t tensor_bytes() const { return tensor_bytes_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  std::vector<std::string> names() const;  // sorted
  size_t size() const { return tensors_.size(); }
  bool has(const std::string& name) const { return tensors_.count(name) != 0; }
  // Throws naming the tensor and the file when it is missing.
  TensorMeta meta(const std::string& name) const;
  // The tensor's bytes inside the mapping (valid as long as this object lives), little-endian, row-major.
  std::span<const std::byte> bytes(const std::string& name) const;
  // Copies a sub-block converted to out_dtype; see WeightSource::read and tensor_slice.h.
  void read(const std::string& name, std::span<const Range> ranges, DType out_dtype, void* dst) const;

 private:
  struct Entry {
    TensorMeta meta;
    uint64_t begin = 0;  // relative to the data section
    uint64_t end = 0;
  };

  void parse_header();
  const Entry& entry(const std::string& name) const;
  std::string tensor_label(const std::string& name) const;  // "path: tensor 'name'"

  std::string path_;
  const std::byte* mapping_ = nullptr;
  uint64_t file_size_ = 0;
  uint64_t data_start_ = 0;  // 8 + N
  uint64_t tensor_bytes_ = 0;
  std::map<std::string, Entry> tensors_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace tpserve
