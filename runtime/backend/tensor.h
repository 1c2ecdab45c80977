// Tensor: a non-owning view of a dense row-major array in a backend's memory (host or device). Backends
// own the memory (weights, KV cache, one workspace arena); the model passes views between ops.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "common/dtype.h"
#include "common/error.h"

namespace tpserve {

enum class Device : uint8_t { kCpu, kCuda };

struct Tensor {
  static constexpr int kMaxDims = 4;
  void* data = nullptr;
  DType dtype = DType::kF32;
  Device device = Device::kCpu;
  int ndim = 0;
  std::array<int64_t, kMaxDims> shape{};

  Tensor() = default;
  Tensor(void* ptr, DType type, Device dev, std::initializer_list<int64_t> dims)
      : data(ptr), dtype(type), device(dev) {
    TPS_CHECK(dims.size() <= kMaxDims, "tensor with ", dims.size(), " dims");
    for (int64_t d : dims) shape[ndim++] = d;
  }

  bool defined() const { return data != nullptr || numel() == 0; }
  int64_t dim(int i) const { return shape[i < 0 ? ndim + i : i]; }
  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < ndim; ++i) n *= shape[i];
    return n;
  }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype); }
  // Elements in one index of dim 0.
  int64_t row_numel() const { return ndim == 0 ? 1 : numel() / shape[0]; }

  template <typename T>
  T* ptr() const {
    return static_cast<T*>(data);
  }

  // Rows [begin, end) along dim 0 (contiguous).
  Tensor rows(int64_t begin, int64_t end) const {
    TPS_CHECK(ndim >= 1 && begin >= 0 && begin <= end && end <= shape[0], "rows [", begin, ", ", end, ") of ",
              shape_string());
    Tensor t = *this;
    t.data = static_cast<char*>(data) + static_cast<size_t>(begin * row_numel()) * dtype_size(dtype);
    t.shape[0] = end - begin;
    return t;
  }

  // The same memory seen with another shape of the same or fewer elements.
  Tensor view(std::initializer_list<int64_t> dims) const {
    Tensor t(data, dtype, device, dims);
    TPS_CHECK(t.numel() <= numel(), "view ", t.shape_string(), " of ", shape_string());
    return t;
  }

  std::string shape_string() const {
    std::string s = "[";
    for (int i = 0; i < ndim; ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "] " + dtype_name(dtype);
  }
};

}  // namespace tpserve
