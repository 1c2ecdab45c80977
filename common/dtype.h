// Element types of checkpoint tensors and of backend tensors, with bf16/f16 <-> f32 conversion.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace tpserve {

enum class DType : uint8_t { kF32, kBF16, kF16, kF8E4M3, kI64, kI32, kI16, kI8, kU8, kBool, kF64 };

size_t dtype_size(DType t);
const char* dtype_name(DType t);  // safetensors spelling: "BF16", "F32", ...
std::optional<DType> dtype_from_name(std::string_view name);

inline float bf16_to_f32(uint16_t v) {
  const uint32_t bits = static_cast<uint32_t>(v) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

// Round to nearest even (NaN stays NaN).
inline uint16_t f32_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu) != 0)
    return static_cast<uint16_t>((bits >> 16) | 0x40);
  const uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

float f16_to_f32(uint16_t v);
uint16_t f32_to_f16(float f);

}  // namespace tpserve
