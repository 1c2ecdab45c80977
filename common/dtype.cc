// Sizes and safetensors names of DType, and IEEE half <-> float conversion (round to nearest even, with
// subnormals, infinities and NaN).
#include "common/dtype.h"

#include <cmath>

namespace tpserve {
namespace {

struct DTypeInfo {
  DType dtype;
  const char* name;
  size_t size;
};

constexpr DTypeInfo kDTypes[] = {
    {DType::kF32, "F32", 4},        {DType::kBF16, "BF16", 2}, {DType::kF16, "F16", 2},
    {DType::kF8E4M3, "F8_E4M3", 1}, {DType::kI64, "I64", 8},   {DType::kI32, "I32", 4},
    {DType::kI16, "I16", 2},        {DType::kI8, "I8", 1},     {DType::kU8, "U8", 1},
    {DType::kBool, "BOOL", 1},      {DType::kF64, "F64", 8},
};

const DTypeInfo& info(DType t) {
  for (const DTypeInfo& d : kDTypes) {
    if (d.dtype == t) return d;
  }
  return kDTypes[0];  // unreachable for valid enumerators
}

}  // namespace

size_t dtype_size(DType t) {
  return info(t).size;
}

const char* dtype_name(DType t) {
  return info(t).name;
}

std::optional<DType> dtype_from_name(std::string_view name) {
  for (const DTypeInfo& d : kDTypes) {
    if (name == d.name) return d.dtype;
  }
  return std::nullopt;
}

float f16_to_f32(uint16_t v) {
  const uint32_t sign = static_cast<uint32_t>(v & 0x8000u) << 16;
  const uint32_t exponent = (v >> 10) & 0x1fu;
  const uint32_t mantissa = v & 0x3ffu;
  uint32_t bits;
  if (exponent == 0) {
    // Zero or subnormal: mantissa * 2^-24, exact in float.
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign != 0 ? -magnitude : magnitude;
  }
  if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | (mantissa << 13);  // inf, or NaN keeping its payload
  } else {
    bits = sign | ((exponent + 112u) << 23) | (mantissa << 13);  // rebias 15 -> 127
  }
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

uint16_t f32_to_f16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  const auto sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t magnitude = bits & 0x7fffffffu;

  if (magnitude >= 0x7f800000u) {
    if (magnitude == 0x7f800000u) return static_cast<uint16_t>(sign | 0x7c00u);  // inf
    // NaN: keep the top payload bits and force quiet so that it cannot turn into inf.
    return static_cast<uint16_t>(sign | 0x7e00u | ((magnitude >> 13) & 0x3ffu));
  }
  // 65520 = halfway between the largest half (65504) and 2^16; ties go to even, which is inf.
  if (magnitude >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);

  const uint32_t exponent = magnitude >> 23;  // biased by 127
  if (exponent < 113) {
    // Below 2^-14: a half subnormal m * 2^-24 with m = significand * 2^(exponent - 126).
    const uint32_t shift = 126 - exponent;  // >= 14
    if (shift > 24) return sign;            // below 2^-25: rounds to zero
    const uint32_t significand = (magnitude & 0x7fffffu) | 0x800000u;
    uint32_t m = significand >> shift;
    const uint32_t remainder = significand & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (remainder > halfway || (remainder == halfway && (m & 1u) != 0)) ++m;  // may carry into 2^-14: fine
    return static_cast<uint16_t>(sign | m);
  }

  // Normal: rebias the exponent and drop 13 mantissa bits, rounding to nearest even. A carry out of the
  // mantissa correctly bumps the exponent.
  uint32_t h = ((exponent - 112) << 10) | ((magnitude >> 13) & 0x3ffu);
  const uint32_t remainder = magnitude & 0x1fffu;
  if (remainder > 0x1000u || (remainder == 0x1000u && (h & 1u) != 0)) ++h;
  return static_cast<uint16_t>(sign | h);
}

}  // namespace tpserve
