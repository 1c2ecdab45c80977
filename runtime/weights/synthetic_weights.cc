// SyntheticWeights: per-element counter-based hashing, per-tensor scales, and slice reads split across
// threads. The value scheme and the scales are documented in synthetic_weights.h.
#include "runtime/weights/synthetic_weights.h"

#include <algorithm>
#include <cmath>
#include <string_view>
#include <thread>

#include "common/error.h"
#include "common/synthetic_value.h"
#include "runtime/model/weight_names.h"

namespace tpserve {
namespace {

constexpr int64_t kParallelThreshold = int64_t(1) << 20;  // elements; smaller reads stay on one thread
constexpr int64_t kMinPerThread = int64_t(1) << 18;

uint64_t fnv1a64(std::string_view s) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001B3ull;
  }
  return h;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

struct Scale {
  float offset;
  float scale;
};

// The scale of a tensor from its name and shape (see the table in synthetic_weights.h).
Scale scale_for(const std::string& name, const std::vector<int64_t>& shape, int num_layers) {
  if (shape.size() == 1) {
    TPS_CHECK(name.find("norm") != std::string::npos, "synthetic weights: 1-D tensor '", name,
              "' is not a norm weight");
    return {1.0f, 0.1f};
  }
  TPS_CHECK(shape.size() == 2 && shape[1] > 0, "synthetic weights: tensor '", name,
            "' must be 2-D [out, in > 0]");
  const double base = std::sqrt(3.0 / static_cast<double>(shape[1]));
  if (name == weight_names::embed_tokens()) return {0.0f, static_cast<float>(std::sqrt(3.0))};
  if (name == weight_names::lm_head()) return {0.0f, static_cast<float>(2.0 * base)};
  if (ends_with(name, ".mlp.gate.weight")) return {0.0f, static_cast<float>(4.0 * base)};
  if (ends_with(name, "o_proj.weight") || ends_with(name, "down_proj.weight"))
    return {0.0f, static_cast<float>(base / std::sqrt(2.0 * num_layers))};
  // q/k/v_proj, gate_proj, up_proj and mtp.fc ([H, 2H], so base = sqrt(3 / (2H))).
  return {0.0f, static_cast<float>(base)};
}

void check_range(const std::string& name, const Range& r, size_t dim, int64_t extent) {
  TPS_CHECK(r.begin >= 0 && r.begin <= r.end && r.end <= extent, "tensor '", name, "': range [", r.begin,
            ", ", r.end, ") is out of bounds for dimension ", dim, " of size ", extent);
}

}  // namespace

SyntheticWeights::SyntheticWeights(const ModelSpec& spec, uint64_t seed) : spec_(spec), seed_(seed) {
  TPS_CHECK(spec.hidden_size > 0 && spec.num_layers > 0 && spec.vocab_size > 0 && spec.head_dim > 0,
            "synthetic weights: the spec needs positive hidden_size, num_layers, vocab_size and head_dim");
  const uint64_t seed_key = mix64(seed + kSyntheticGolden);
  std::vector<ExpectedTensor> tensors = expected_tensors(spec, ExpertLayout::kPerExpert);
  names_.reserve(tensors.size());
  entries_.reserve(tensors.size());
  for (ExpectedTensor& t : tensors) {
    Entry e;
    const Scale s = scale_for(t.name, t.shape, spec.num_layers);
    e.offset = s.offset;
    e.scale = s.scale;
    e.key = mix64(seed_key ^ fnv1a64(t.name));
    e.shape = std::move(t.shape);
    names_.push_back(t.name);
    entries_.emplace(std::move(t.name), std::move(e));
  }
}

const SyntheticWeights::Entry& SyntheticWeights::entry(const std::string& name) const {
  const auto it = entries_.find(name);
  if (it == entries_.end()) TPS_THROW("tensor '", name, "' not found in ", describe());
  return it->second;
}

bool SyntheticWeights::has(const std::string& name) const {
  return entries_.count(name) != 0;
}

TensorMeta SyntheticWeights::meta(const std::string& name) const {
  TensorMeta m;
  m.dtype = DType::kBF16;
  m.shape = entry(name).shape;
  return m;
}

std::vector<std::string> SyntheticWeights::names() const {
  return names_;
}

std::string SyntheticWeights::describe() const {
  return "synthetic " + spec_.summary() + " seed " + std::to_string(seed_);
}

std::optional<SyntheticSlice> SyntheticWeights::synthetic_slice(const std::string& name,
                                                                std::span<const Range> ranges) const {
  const Entry& e = entry(name);
  const size_t ndim = e.shape.size();
  if (ndim < 1 || ndim > 3 || ranges.size() != ndim) return std::nullopt;
  SyntheticSlice s;
  s.key = e.key;
  s.offset = e.offset;
  s.scale = e.scale;
  s.ndim = static_cast<int>(ndim);
  for (size_t d = 0; d < ndim; ++d) {
    check_range(name, ranges[d], d, e.shape[d]);
    s.shape[d] = e.shape[d];
    s.begin[d] = ranges[d].begin;
    s.size[d] = ranges[d].size();
  }
  return s;
}

void SyntheticWeights::read(const std::string& name, std::span<const Range> ranges, DType out_dtype,
                            void* dst) const {
  const Entry& e = entry(name);
  TPS_CHECK(out_dtype == DType::kF32 || out_dtype == DType::kBF16, "synthetic weights: '", name,
            "' can be read as F32 or BF16 only");
  const size_t ndim = e.shape.size();
  TPS_CHECK(ranges.size() == ndim, "tensor '", name, "': ", ranges.size(), " ranges given for a ", ndim,
            "-D tensor");
  int64_t total = 1;
  for (size_t d = 0; d < ndim; ++d) {
    check_range(name, ranges[d], d, e.shape[d]);
    total *= ranges[d].size();
  }
  if (total == 0) return;
  TPS_CHECK(dst != nullptr, "tensor '", name, "': null destination");

  // Source strides (row-major) and the sliced shape; rows are all dimensions but the last.
  std::vector<int64_t> stride(ndim, 1);
  for (size_t d = ndim - 1; d > 0; --d) stride[d - 1] = stride[d] * e.shape[d];
  const int64_t row_len = ranges[ndim - 1].size();
  const int64_t rows = total / row_len;

  auto fill_rows = [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      // Source flat index of the row's first element.
      int64_t base = ranges[ndim - 1].begin, rem = r;
      for (size_t d = ndim - 1; d > 0; --d) {
        const int64_t n = ranges[d - 1].size();
        base += (ranges[d - 1].begin + rem % n) * stride[d - 1];
        rem /= n;
      }
      const int64_t out = r * row_len;
      if (out_dtype == DType::kBF16) {
        uint16_t* o = static_cast<uint16_t*>(dst) + out;
        for (int64_t j = 0; j < row_len; ++j)
          o[j] = f32_to_bf16(synthetic_value(e.key, e.offset, e.scale, base + j));
      } else {
        float* o = static_cast<float*>(dst) + out;
        for (int64_t j = 0; j < row_len; ++j)
          o[j] = bf16_to_f32(f32_to_bf16(synthetic_value(e.key, e.offset, e.scale, base + j)));
      }
    }
  };

  int64_t threads = 1;
  if (total >= kParallelThreshold) {
    const int64_t hw = std::max<int64_t>(1, std::thread::hardware_concurrency());
    threads = std::clamp<int64_t>(total / kMinPerThread, 1, std::min(hw, rows));
  }
  if (threads == 1) {
    fill_rows(0, rows);
    return;
  }
  std::vector<std::thread> pool;
  pool.reserve(threads - 1);
  const int64_t per = (rows + threads - 1) / threads;
  for (int64_t t = 1; t < threads; ++t) {
    const int64_t r0 = t * per, r1 = std::min(rows, r0 + per);
    if (r0 < r1) pool.emplace_back(fill_rows, r0, r1);
  }
  fill_rows(0, std::min(rows, per));
  for (std::thread& th : pool) th.join();
}

}  // namespace tpserve
