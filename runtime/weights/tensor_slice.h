// Copying a sub-block of a row-major tensor in memory (an mmapped checkpoint, a synthetic buffer) into a
// destination buffer with dtype conversion. Shared by every WeightSource so that slicing and conversion
// rules are written once.
//
// Conversions: BF16, F16, F32 and F64 sources into F32 or BF16 destinations (F32 -> BF16 rounds to nearest
// even). F8_E4M3 is refused for now: block-scaled fp8 checkpoints need their `weight_scale_inv` tensors,
// which a later version will pass alongside the source.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "common/dtype.h"
#include "runtime/weights/weight_source.h"

namespace tpserve {

// Throws tpserve::Error (prefixed with `what`, e.g. "x.safetensors: tensor 'w'") unless there is one
// Range per dimension and 0 <= begin <= end <= dim for each.
void check_slice_ranges(std::span<const int64_t> shape, std::span<const Range> ranges,
                        const std::string& what);

// Throws unless `src` -> `out` is a supported conversion (see above).
void check_slice_conversion(DType src, DType out, const std::string& what);

// Copies ranges[0] x ranges[1] x ... of the tensor at `src` (row-major, `shape`, `src_dtype`) into `dst`,
// row-major over the sliced shape, converted to `out_dtype`. Contiguous innermost runs (trailing dimensions
// read whole merge into one run) are converted in one loop.
void copy_tensor_slice(const void* src, DType src_dtype, std::span<const int64_t> shape,
                       std::span<const Range> ranges, DType out_dtype, void* dst, const std::string& what);

}  // namespace tpserve
