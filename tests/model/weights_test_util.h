// Helpers for the weights tests: a temporary directory removed at the end of a test, hand-made
// safetensors bytes (for broken files) and writer shortcuts for float tensors.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/error.h"
#include "runtime/weights/safetensors_writer.h"

namespace tpserve::testing_util {

class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "tpserve_weights_XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return (std::filesystem::path(path_) / name).string(); }

 private:
  std::string path_;
};

// The 8-byte little-endian length field followed by `header` and `data_bytes` zero bytes; `length_field`
// defaults to the real header length.
inline std::string raw_safetensors(const std::string& header, size_t data_bytes, int64_t length_field = -1) {
  const uint64_t len = length_field < 0 ? header.size() : static_cast<uint64_t>(length_field);
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((len >> (8 * i)) & 0xff);
  return bytes + header + std::string(data_bytes, '\0');
}

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Values 0, 1, 2, ... (exact in bf16 up to 256, in f16 up to 2048).
inline std::vector<float> iota_floats(size_t n, float scale = 1.0f) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(i) * scale;
  return v;
}

inline void add_f32(SafetensorsWriter& w, const std::string& name, const std::vector<int64_t>& shape,
                    const std::vector<float>& values) {
  w.add(name, DType::kF32, shape, values.data(), values.size() * sizeof(float));
}

inline void add_bf16(SafetensorsWriter& w, const std::string& name, const std::vector<int64_t>& shape,
                     const std::vector<float>& values) {
  std::vector<uint16_t> bits(values.size());
  for (size_t i = 0; i < values.size(); ++i) bits[i] = f32_to_bf16(values[i]);
  w.add(name, DType::kBF16, shape, bits.data(), bits.size() * sizeof(uint16_t));
}

// The message of the tpserve::Error that `fn` throws, or "<no error>" (other exceptions fail the test).
template <typename Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}

}  // namespace tpserve::testing_util
