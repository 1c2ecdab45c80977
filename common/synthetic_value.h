// The values of synthetic weights (runtime/weights/synthetic_weights.h documents the scheme), shared by the
// host generator and the device fill kernel so that both give the same bf16 bits: element `index` of a
// tensor with stream key `key` is bf16(offset + scale * u), u uniform in [-1, 1) from 24 hashed bits. The
// multiply and the add are rounded separately (no fused multiply-add) on host and device alike.
#pragma once

#include <cstdint>

#include "common/counter_hash.h"

namespace tpserve {

inline constexpr uint64_t kSyntheticGolden = 0x9E3779B97F4A7C15ull;

// Uniform in [-1, 1) from the top 24 bits of the hashed counter (exact in float).
TPS_HOST_DEVICE inline float synthetic_uniform(uint64_t key, int64_t index) {
  const uint64_t z = mix64(key + (static_cast<uint64_t>(index) + 1) * kSyntheticGolden);
  return static_cast<float>(z >> 40) * (1.0f / 8388608.0f) - 1.0f;
}

// offset + scale * u in f32, before the rounding to bf16.
TPS_HOST_DEVICE inline float synthetic_value(uint64_t key, float offset, float scale, int64_t index) {
  const float u = synthetic_uniform(key, index);
#if defined(__CUDA_ARCH__)
  return __fadd_rn(offset, __fmul_rn(scale, u));
#else
  return offset + scale * u;  // the host build compiles this with -ffp-contract=off (runtime/CMakeLists.txt)
#endif
}

// A slice of a synthetic tensor (up to 3 dimensions), to be generated where it will live.
struct SyntheticSlice {
  uint64_t key = 0;
  float offset = 0.0f, scale = 0.0f;
  int ndim = 0;
  int64_t shape[3] = {1, 1, 1};  // the whole tensor's
  int64_t begin[3] = {0, 0, 0};  // the slice: [begin, begin + size) per dimension
  int64_t size[3] = {1, 1, 1};
  int64_t numel() const { return size[0] * size[1] * size[2]; }
};

}  // namespace tpserve
