// SafetensorsFile: mmap, header validation and slice reads of one .safetensors file.
#include "runtime/weights/safetensors_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "common/error.h"
#include "runtime/weights/tensor_slice.h"

namespace tpserve {
namespace {

using json = nlohmann::json;

// A header value for a message: whole where it is flat, by kind where it nests (a dump recurses once a level,
// and a crafted header may nest deeply).
std::string brief(const json& v) {
  if (!v.is_structured()) return v.dump();
  const bool flat = std::none_of(v.begin(), v.end(), [](const json& e) { return e.is_structured(); });
  if (flat && v.size() <= 16) return v.dump();
  return std::string(flat ? "a long " : "a nested ") + v.type_name();
}

constexpr const char* kKnownDTypes = "BF16, F16, F32, F64, F8_E4M3, I64, I32, I16, I8, U8, BOOL";

uint64_t read_le64(const std::byte* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<uint64_t>(p[i]);
  return v;
}

// True (and *out set) when v is a JSON integer >= 0; nlohmann parses those as unsigned.
bool non_negative_integer(const json& v, uint64_t* out) {
  if (v.is_number_unsigned()) {
    *out = v.get<uint64_t>();
    return true;
  }
  return false;  // negative integers, floats, strings, ...
}

// Parses the header, remembering the first key seen twice in the header or in one tensor's entry (nlohmann
// would keep only the last). A header nests three deep at most ({name: {shape: [...]}}): deeper nesting
// is refused as it opens, before a hostile header of nested brackets can build a tree of gigabytes.
json parse_header_json(const char* begin, const char* end, std::string* duplicate_key, bool* too_deep) {
  std::set<std::string> header_keys, entry_keys;  // the header's, and the open entry's
  const json::parser_callback_t on_event = [&](int depth, json::parse_event_t event, json& parsed) {
    const bool opens =
        event == json::parse_event_t::object_start || event == json::parse_event_t::array_start;
    if (opens && depth >= 3) {
      *too_deep = true;
      return false;
    }
    if (opens && depth == 1) entry_keys.clear();
    if (event == json::parse_event_t::key && (depth == 1 || depth == 2) && duplicate_key->empty()) {
      const std::string key = parsed.get<std::string>();
      if (!(depth == 1 ? header_keys : entry_keys).insert(key).second) *duplicate_key = key;
    }
    return true;
  };
  return json::parse(begin, end, on_event);
}

}  // namespace

SafetensorsFile::SafetensorsFile(std::string path) : path_(std::move(path)) {
  // O_NONBLOCK: opening a FIFO would otherwise wait for a writer; the regular-file check below refuses it.
  const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) TPS_THROW(path_, ": cannot open: ", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    TPS_THROW(path_, ": not a regular file");
  }
  file_size_ = static_cast<uint64_t>(st.st_size);
  if (file_size_ < 8) {
    ::close(fd);
    TPS_THROW(path_, ": file is ", file_size_, " bytes, shorter than the 8-byte header length");
  }
  void* mapped = ::mmap(nullptr, file_size_, PROT_READ, MAP_PRIVATE, fd, 0);
  const int mmap_errno = errno;
  ::close(fd);  // the mapping keeps the file alive
  if (mapped == MAP_FAILED) TPS_THROW(path_, ": mmap failed: ", std::strerror(mmap_errno));
  mapping_ = static_cast<const std::byte*>(mapped);
  try {
    parse_header();
  } catch (...) {
    ::munmap(const_cast<std::byte*>(mapping_), file_size_);
    throw;
  }
}

SafetensorsFile::~SafetensorsFile() {
  if (mapping_ != nullptr) ::munmap(const_cast<std::byte*>(mapping_), file_size_);
}

std::string SafetensorsFile::tensor_label(const std::string& name) const {
  return path_ + ": tensor '" + name + "'";
}

void SafetensorsFile::parse_header() {
  const uint64_t header_len = read_le64(mapping_);
  if (header_len > kMaxHeaderBytes) {
    TPS_THROW(path_, ": header length ", header_len, " is absurdly large (limit ", kMaxHeaderBytes,
              " bytes): not a safetensors file or corrupt");
  }
  if (header_len > file_size_ - 8) {
    TPS_THROW(path_, ": header length ", header_len, " runs past the end of the file (", file_size_,
              " bytes)");
  }
  data_start_ = 8 + header_len;
  const uint64_t data_size = file_size_ - data_start_;

  const char* text = reinterpret_cast<const char*>(mapping_ + 8);
  json header;
  std::string duplicate_key;
  bool too_deep = false;
  try {
    header = parse_header_json(text, text + header_len, &duplicate_key, &too_deep);
  } catch (const json::exception& e) {
    TPS_THROW(path_, ": malformed header JSON: ", e.what());
  }
  if (too_deep)
    TPS_THROW(path_, ": header nests deeper than a safetensors header does ({name: {shape: [...]}})");
  if (!header.is_object()) TPS_THROW(path_, ": header is not a JSON object (it is ", header.type_name(), ")");
  if (!duplicate_key.empty()) TPS_THROW(path_, ": header lists '", duplicate_key, "' twice");

  struct Span {
    uint64_t begin, end;
    const std::string* name;
  };
  std::vector<Span> spans;
  for (const auto& [key, value] : header.items()) {
    if (key == "__metadata__") {
      if (!value.is_object())
        TPS_THROW(path_, ": __metadata__ must be an object (it is ", value.type_name(), ")");
      for (const auto& [meta_key, meta_value] : value.items()) {
        if (!meta_value.is_string()) {
          TPS_THROW(path_, ": __metadata__ values must be strings; '", meta_key, "' is ",
                    meta_value.type_name());
        }
        metadata_[meta_key] = meta_value.get<std::string>();
      }
      continue;
    }
    const std::string label = tensor_label(key);
    if (!value.is_object()) TPS_THROW(label, ": entry must be an object (it is ", value.type_name(), ")");
    for (const char* field : {"dtype", "shape", "data_offsets"}) {
      if (!value.contains(field)) TPS_THROW(label, ": missing '", field, "'");
    }

    Entry e;
    const json& dtype = value["dtype"];
    if (!dtype.is_string()) TPS_THROW(label, ": 'dtype' must be a string (it is ", dtype.type_name(), ")");
    const auto parsed_dtype = dtype_from_name(dtype.get<std::string>());
    if (!parsed_dtype) {
      TPS_THROW(label, ": unknown dtype '", dtype.get<std::string>(), "' (known: ", kKnownDTypes, ")");
    }
    e.meta.dtype = *parsed_dtype;

    const json& shape = value["shape"];
    if (!shape.is_array()) TPS_THROW(label, ": 'shape' must be an array (it is ", shape.type_name(), ")");
    uint64_t numel = 1;
    bool numel_overflow = false;
    for (size_t i = 0; i < shape.size(); ++i) {
      uint64_t dim = 0;
      if (shape[i].is_number_integer() && !shape[i].is_number_unsigned() && shape[i].get<int64_t>() < 0) {
        TPS_THROW(label, ": negative dimension ", brief(shape[i]), " in shape ", brief(shape));
      }
      if (!non_negative_integer(shape[i], &dim) || dim > uint64_t{std::numeric_limits<int64_t>::max()}) {
        TPS_THROW(label, ": shape ", brief(shape), " has a dimension that is not a non-negative integer");
      }
      numel_overflow = numel_overflow || __builtin_mul_overflow(numel, dim, &numel);
      e.meta.shape.push_back(static_cast<int64_t>(dim));
    }

    const json& offsets = value["data_offsets"];
    if (!offsets.is_array() || offsets.size() != 2 || !non_negative_integer(offsets[0], &e.begin) ||
        !non_negative_integer(offsets[1], &e.end)) {
      TPS_THROW(label, ": 'data_offsets' must be [begin, end] with non-negative integers (got ",
                brief(offsets), ")");
    }
    if (e.begin > e.end) TPS_THROW(label, ": data_offsets begin ", e.begin, " > end ", e.end);
    if (e.end > data_size) {
      TPS_THROW(label, ": data_offsets [", e.begin, ", ", e.end, "] out of range of the data section (",
                data_size, " bytes)");
    }
    uint64_t expected_bytes = 0;
    if (numel_overflow || __builtin_mul_overflow(numel, dtype_size(e.meta.dtype), &expected_bytes) ||
        expected_bytes != e.end - e.begin) {
      TPS_THROW(label, ": data_offsets span ", e.end - e.begin, " bytes but shape ", brief(shape), " of ",
                dtype_name(e.meta.dtype), " needs ",
                numel_overflow ? "more than 2^64" : std::to_string(expected_bytes), " bytes");
    }
    tensor_bytes_ += expected_bytes;
    const auto inserted = tensors_.emplace(key, std::move(e));
    const Entry& stored = inserted.first->second;
    if (stored.end > stored.begin) spans.push_back(Span{stored.begin, stored.end, &inserted.first->first});
  }

  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.begin < b.begin; });
  for (size_t i = 1; i < spans.size(); ++i) {
    const Span& prev = spans[i - 1];
    const Span& cur = spans[i];
    if (cur.begin < prev.end) {
      TPS_THROW(path_, ": tensors '", *prev.name, "' [", prev.begin, ", ", prev.end, ") and '", *cur.name,
                "' [", cur.begin, ", ", cur.end, ") overlap");
    }
  }
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> out;
  out.reserve(tensors_.size());
  for (const auto& [name, entry] : tensors_) out.push_back(name);
  return out;
}

const SafetensorsFile::Entry& SafetensorsFile::entry(const std::string& name) const {
  const auto it = tensors_.find(name);
  if (it == tensors_.end()) TPS_THROW(path_, ": no tensor '", name, "'");
  return it->second;
}

TensorMeta SafetensorsFile::meta(const std::string& name) const {
  return entry(name).meta;
}

std::span<const std::byte> SafetensorsFile::bytes(const std::string& name) const {
  const Entry& e = entry(name);
  return {mapping_ + data_start_ + e.begin, static_cast<size_t>(e.end - e.begin)};
}

void SafetensorsFile::read(const std::string& name, std::span<const Range> ranges, DType out_dtype,
                           void* dst) const {
  const Entry& e = entry(name);
  copy_tensor_slice(mapping_ + data_start_ + e.begin, e.meta.dtype, e.meta.shape, ranges, out_dtype, dst,
                    tensor_label(name));
}

}  // namespace tpserve
