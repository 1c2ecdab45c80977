// Sub-block copy with dtype conversion: one function pointer chosen per (source, destination) dtype pair,
// then plain loops over contiguous runs.
#include "runtime/weights/tensor_slice.h"

#include <cstddef>
#include <cstring>
#include <vector>

#include "common/error.h"

namespace tpserve {
namespace {

using ConvertRun = void (*)(const std::byte* src, std::byte* dst, size_t count);

float load_bf16(const std::byte* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof(v));
  return bf16_to_f32(v);
}
float load_f16(const std::byte* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof(v));
  return f16_to_f32(v);
}
float load_f32(const std::byte* p) {
  float v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
// F64 -> BF16 goes through float (double rounding; irrelevant for weights).
float load_f64(const std::byte* p) {
  double v;
  std::memcpy(&v, p, sizeof(v));
  return static_cast<float>(v);
}
void store_f32(float v, std::byte* p) {
  std::memcpy(p, &v, sizeof(v));
}
void store_bf16(float v, std::byte* p) {
  const uint16_t h = f32_to_bf16(v);
  std::memcpy(p, &h, sizeof(h));
}

template <float (*Load)(const std::byte*), size_t kSrcSize, void (*Store)(float, std::byte*), size_t kDstSize>
void convert_run(const std::byte* src, std::byte* dst, size_t count) {
  for (size_t i = 0; i < count; ++i) Store(Load(src + i * kSrcSize), dst + i * kDstSize);
}

template <size_t kSize>
void copy_run(const std::byte* src, std::byte* dst, size_t count) {
  std::memcpy(dst, src, count * kSize);
}

// nullptr when the pair is not supported.
ConvertRun find_conversion(DType src, DType out) {
  if (out == DType::kF32) {
    switch (src) {
      case DType::kF32:
        return copy_run<4>;
      case DType::kBF16:
        return convert_run<load_bf16, 2, store_f32, 4>;
      case DType::kF16:
        return convert_run<load_f16, 2, store_f32, 4>;
      case DType::kF64:
        return convert_run<load_f64, 8, store_f32, 4>;
      default:
        return nullptr;
    }
  }
  if (out == DType::kBF16) {
    switch (src) {
      case DType::kBF16:
        return copy_run<2>;
      case DType::kF32:
        return convert_run<load_f32, 4, store_bf16, 2>;
      case DType::kF16:
        return convert_run<load_f16, 2, store_bf16, 2>;
      case DType::kF64:
        return convert_run<load_f64, 8, store_bf16, 2>;
      default:
        return nullptr;
    }
  }
  return nullptr;
}

}  // namespace

void check_slice_ranges(std::span<const int64_t> shape, std::span<const Range> ranges,
                        const std::string& what) {
  if (ranges.size() != shape.size()) {
    TPS_THROW(what, ": read with ", ranges.size(), " ranges, but the tensor has ", shape.size(),
              " dimensions");
  }
  for (size_t d = 0; d < shape.size(); ++d) {
    const Range& r = ranges[d];
    if (r.begin < 0 || r.begin > r.end || r.end > shape[d]) {
      TPS_THROW(what, ": range [", r.begin, ", ", r.end, ") of dimension ", d, " is out of bounds [0, ",
                shape[d], ")");
    }
  }
}

void check_slice_conversion(DType src, DType out, const std::string& what) {
  if (out != DType::kF32 && out != DType::kBF16) {
    TPS_THROW(what, ": cannot read into ", dtype_name(out),
              " (only F32 and BF16 destinations are supported)");
  }
  if (src == DType::kF8E4M3) {
    TPS_THROW(what, ": F8_E4M3 weights are not supported yet (they need their block scales)");
  }
  if (find_conversion(src, out) == nullptr) {
    TPS_THROW(what, ": converting ", dtype_name(src), " to ", dtype_name(out), " is not supported");
  }
}

void copy_tensor_slice(const void* src, DType src_dtype, std::span<const int64_t> shape,
                       std::span<const Range> ranges, DType out_dtype, void* dst, const std::string& what) {
  check_slice_ranges(shape, ranges, what);
  check_slice_conversion(src_dtype, out_dtype, what);
  const ConvertRun convert = find_conversion(src_dtype, out_dtype);
  const size_t src_size = dtype_size(src_dtype);
  const size_t out_size = dtype_size(out_dtype);
  const auto* src_bytes = static_cast<const std::byte*>(src);
  auto* dst_bytes = static_cast<std::byte*>(dst);

  const size_t ndim = shape.size();
  if (ndim == 0) {  // a scalar
    convert(src_bytes, dst_bytes, 1);
    return;
  }
  for (const Range& r : ranges) {
    if (r.size() == 0) return;
  }

  // Element strides of the source.
  std::vector<int64_t> stride(ndim, 1);
  for (size_t d = ndim - 1; d > 0; --d) stride[d - 1] = stride[d] * shape[d];

  // Dimensions after `run_dim` are read whole, so one run covers ranges[run_dim] x shape[run_dim+1:].
  size_t run_dim = ndim - 1;
  while (run_dim > 0 && ranges[run_dim].begin == 0 && ranges[run_dim].end == shape[run_dim]) --run_dim;
  const auto run_elems = static_cast<size_t>(ranges[run_dim].size() * stride[run_dim]);
  const int64_t run_start = ranges[run_dim].begin * stride[run_dim];

  // Odometer over the outer dimensions [0, run_dim).
  std::vector<int64_t> index(run_dim);
  for (size_t d = 0; d < run_dim; ++d) index[d] = ranges[d].begin;
  for (;;) {
    int64_t offset = run_start;
    for (size_t d = 0; d < run_dim; ++d) offset += index[d] * stride[d];
    convert(src_bytes + static_cast<size_t>(offset) * src_size, dst_bytes, run_elems);
    dst_bytes += run_elems * out_size;

    size_t d = run_dim;
    while (d > 0) {
      --d;
      if (++index[d] < ranges[d].end) break;
      index[d] = ranges[d].begin;
      if (d == 0) return;
    }
    if (run_dim == 0) return;
  }
}

}  // namespace tpserve
