// SafetensorsWriter: builds .safetensors files (the synthetic model generator and tests use it), and
// write_index_json() writes the model.safetensors.index.json of a sharded checkpoint.
//
// The header lists tensors in insertion order with __metadata__ first, and is padded with spaces to a
// multiple of 8 bytes so that the data section starts 8-byte aligned. Files are written to "<path>.tmp"
// and renamed, so that a reader never sees half a file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/dtype.h"

namespace tpserve {

class SafetensorsWriter {
 public:
  // Copies `nbytes` bytes of little-endian, row-major data. Throws when nbytes != numel(shape) *
  // dtype_size(dtype), a dimension is negative or the name was added before.
  void add(const std::string& name, DType dtype, const std::vector<int64_t>& shape, const void* data,
           size_t nbytes);
  // Writes every added tensor; throws on I/O errors naming the path.
  void write(const std::string& path, const std::map<std::string, std::string>& metadata = {}) const;

  size_t size() const { return tensors_.size(); }
  uint64_t data_bytes() const { return data_.size(); }

 private:
  struct Pending {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    uint64_t begin;
    uint64_t end;
  };
  std::vector<Pending> tensors_;
  std::vector<std::byte> data_;
};

// Writes dir/model.safetensors.index.json: {"metadata": {"total_size": total_size}, "weight_map": ...}.
void write_index_json(const std::string& dir, const std::map<std::string, std::string>& weight_map,
                      uint64_t total_size);

}  // namespace tpserve
