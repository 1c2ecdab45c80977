// WeightSource: named tensors read in slices. Implemented by a safetensors checkpoint (mmapped, single or
// sharded) and by the synthetic generator (weights computed from a seed, no files). Loaders read only the
// slice a rank needs (rows for column-parallel, columns for row-parallel, one expert of a fused 3-D tensor),
// converted to the dtype the backend keeps; nothing copies a whole file into memory.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "common/synthetic_value.h"

namespace tpserve {

struct TensorMeta {
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
};

// Half-open index range along one dimension.
struct Range {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
};

class WeightSource {
 public:
  virtual ~WeightSource() = default;
  virtual bool has(const std::string& name) const = 0;
  // Throws tpserve::Error naming the tensor (and where it was looked for) when it is missing.
  virtual TensorMeta meta(const std::string& name) const = 0;
  virtual std::vector<std::string> names() const = 0;
  // Reads the sub-block ranges[0] x ranges[1] x ... (one Range per dimension, ranges.size() == ndim) into
  // dst, row-major over the sliced shape, converted to out_dtype (kF32 or kBF16). Throws on ranges out of
  // bounds.
  virtual void read(const std::string& name, std::span<const Range> ranges, DType out_dtype,
                    void* dst) const = 0;
  // For generated weights: the slice as a SyntheticSlice, so that a backend can generate it in place
  // (Backend::fill_synthetic); nullopt for weights read from files.
  virtual std::optional<SyntheticSlice> synthetic_slice(const std::string& name,
                                                        std::span<const Range> ranges) const {
    (void)name, (void)ranges;
    return std::nullopt;
  }
  // A short description for logs ("checkpoint /x (3 shards)", "synthetic tiny seed 1").
  virtual std::string describe() const = 0;

  // Convenience: the whole tensor as float32.
  std::vector<float> read_all_f32(const std::string& name) const;
};

}  // namespace tpserve
