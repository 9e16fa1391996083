// bf16 and IEEE f16 storage types. Arithmetic happens in f32: load with to_float(),
// compute, store with from_float() (round to nearest even; NaN stays NaN).
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace strider {

struct bf16 {
  uint16_t bits = 0;

  static bf16 from_float(float f) {
    uint32_t u = std::bit_cast<uint32_t>(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return from_bits(uint16_t((u >> 16) | 0x40u));  // quiet NaN
    uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
    return from_bits(uint16_t((u + rounding) >> 16));
  }
  static constexpr bf16 from_bits(uint16_t b) {
    bf16 r;
    r.bits = b;
    return r;
  }
  float to_float() const { return std::bit_cast<float>(uint32_t(bits) << 16); }
  explicit operator float() const { return to_float(); }
};

struct f16 {
  uint16_t bits = 0;

  static f16 from_float(float f);
  static constexpr f16 from_bits(uint16_t b) {
    f16 r;
    r.bits = b;
    return r;
  }
  float to_float() const;
  explicit operator float() const { return to_float(); }
};

inline float f16::to_float() const {
  uint32_t sign = uint32_t(bits & 0x8000u) << 16;
  uint32_t exponent = (bits >> 10) & 0x1fu;
  uint32_t mantissa = bits & 0x3ffu;
  if (exponent == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  if (exponent == 0) {
    // zero or subnormal: value = mantissa * 2^-24
    float magnitude = std::ldexp(float(mantissa), -24);
    return sign ? -magnitude : magnitude;
  }
  return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

inline f16 f16::from_float(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return from_bits(sign | 0x7e00u);            // NaN
  if (abs >= 0x477ff000u) return from_bits(sign | 0x7c00u);           // rounds to inf
  if (abs < 0x38800000u) {                                            // subnormal or zero in f16
    // value / 2^-24 rounded to nearest even gives the subnormal mantissa.
    float scaled = std::bit_cast<float>(abs) * 16777216.0f;           // exact: power of two
    float rounded = std::nearbyint(scaled);                           // default mode: ties to even
    return from_bits(sign | uint16_t(rounded));
  }
  uint32_t rounding = 0xfffu + ((abs >> 13) & 1u);
  uint32_t r = (abs + rounding) >> 13;                                // may carry into exponent: fine
  return from_bits(sign | uint16_t(r - (112u << 10)));
}

}  // namespace strider
