// SafetensorsWriter and write_index_json.
#include "runtime/weights/safetensors_writer.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/error.h"

namespace tpserve {
namespace {

// Writes header then data to path.tmp, then renames it to path.
void write_file_atomically(const std::string& path, const std::string& header,
                           const std::vector<std::byte>& data) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) TPS_THROW(tmp, ": cannot open for writing: ", std::strerror(errno));
    out.write(header.data(), static_cast<std::streamsize>(header.size()));
    out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
    out.close();
    if (!out) TPS_THROW(tmp, ": write failed: ", std::strerror(errno));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    TPS_THROW("cannot rename ", tmp, " to ", path, ": ", std::strerror(errno));
  }
}

}  // namespace

void SafetensorsWriter::add(const std::string& name, DType dtype, const std::vector<int64_t>& shape,
                            const void* data, size_t nbytes) {
  TPS_CHECK(name != "__metadata__", "'__metadata__' is reserved");
  for (const Pending& t : tensors_) TPS_CHECK(t.name != name, "tensor '", name, "' added twice");
  uint64_t numel = 1;
  for (int64_t d : shape) {
    TPS_CHECK(d >= 0, "tensor '", name, "': negative dimension ", d);
    numel *= static_cast<uint64_t>(d);
  }
  TPS_CHECK(numel * dtype_size(dtype) == nbytes, "tensor '", name, "': ", nbytes,
            " bytes given, shape needs ", numel * dtype_size(dtype));
  const uint64_t begin = data_.size();
  const auto* bytes = static_cast<const std::byte*>(data);
  data_.insert(data_.end(), bytes, bytes + nbytes);
  tensors_.push_back(Pending{name, dtype, shape, begin, data_.size()});
}

void SafetensorsWriter::write(const std::string& path,
                              const std::map<std::string, std::string>& metadata) const {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  for (const Pending& t : tensors_) {
    header[t.name] = {{"dtype", dtype_name(t.dtype)}, {"shape", t.shape}, {"data_offsets", {t.begin, t.end}}};
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');

  std::string preamble(8, '\0');
  const uint64_t len = text.size();
  for (int i = 0; i < 8; ++i) preamble[i] = static_cast<char>((len >> (8 * i)) & 0xff);
  write_file_atomically(path, preamble + text, data_);
}

void write_index_json(const std::string& dir, const std::map<std::string, std::string>& weight_map,
                      uint64_t total_size) {
  const nlohmann::ordered_json index = {{"metadata", {{"total_size", total_size}}},
                                        {"weight_map", weight_map}};
  const std::string text = index.dump(2) + "\n";
  const std::string path = (std::filesystem::path(dir) / "model.safetensors.index.json").string();
  std::ofstream out(path, std::ios::trunc);
  if (!out) TPS_THROW(path, ": cannot open for writing: ", std::strerror(errno));
  out << text;
  out.close();
  if (!out) TPS_THROW(path, ": write failed: ", std::strerror(errno));
}

}  // namespace tpserve
