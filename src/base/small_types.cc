#include "base/small_types.h"

#include <cmath>
#include <limits>

namespace strider {
namespace {

// A small float format: its field widths, its exponent bias, its largest finite value,
// and how it spells the non-finite (fnuz formats: no infinity, no -0, NaN is 0x80).
struct MiniFloat {
  int exponent_bits, mantissa_bits, bias;
  double largest;
  bool has_infinity, fnuz, has_nan;
};

constexpr MiniFloat kE4M3FN{4, 3, 7, 448.0, false, false, true};
constexpr MiniFloat kE4M3FNUZ{4, 3, 8, 240.0, false, true, true};
constexpr MiniFloat kE5M2{5, 2, 15, 57344.0, true, false, true};
constexpr MiniFloat kE5M2FNUZ{5, 2, 16, 57344.0, false, true, true};
constexpr MiniFloat kE2M1{2, 1, 1, 6.0, false, false, false};

const MiniFloat* format_of(DType dtype) {
  switch (dtype) {
    case DType::kF8E4M3FN: return &kE4M3FN;
    case DType::kF8E4M3FNUZ: return &kE4M3FNUZ;
    case DType::kF8E5M2: return &kE5M2;
    case DType::kF8E5M2FNUZ: return &kE5M2FNUZ;
    case DType::kF4E2M1: return &kE2M1;
    default: return nullptr;
  }
}

int total_bits(const MiniFloat& f) { return 1 + f.exponent_bits + f.mantissa_bits; }
uint8_t sign_bit(const MiniFloat& f) { return uint8_t(1u << (total_bits(f) - 1)); }

// The NaN encoding (e4m3fn: all ones, keeping the sign; e5m2: exponent all ones with a
// mantissa; fnuz: the would-be -0). float4 has none: ONNX's conversion gives 0x8 for NaN.
uint8_t nan_of(const MiniFloat& f, bool negative) {
  if (f.fnuz || !f.has_nan) return sign_bit(f);
  const uint8_t magnitude = uint8_t(sign_bit(f) - 1);
  return uint8_t(magnitude | (negative ? sign_bit(f) : 0));
}

double decode(uint8_t byte, const MiniFloat& f) {
  const uint8_t sign = sign_bit(f), magnitude_mask = uint8_t(sign - 1);
  const int exponent = (byte & magnitude_mask) >> f.mantissa_bits;
  const int mantissa = byte & ((1 << f.mantissa_bits) - 1);
  const int top = (1 << f.exponent_bits) - 1;
  const bool negative = (byte & sign) != 0;
  if (f.fnuz && byte == sign) return std::numeric_limits<double>::quiet_NaN();
  if (!f.fnuz && f.has_nan) {
    if (f.has_infinity && exponent == top)
      return mantissa == 0 ? (negative ? -INFINITY : INFINITY) : std::numeric_limits<double>::quiet_NaN();
    if (!f.has_infinity && (byte & magnitude_mask) == magnitude_mask) return std::numeric_limits<double>::quiet_NaN();
  }
  const double value = exponent == 0 ? std::ldexp(double(mantissa), 1 - f.bias - f.mantissa_bits)
                                     : std::ldexp(double((1 << f.mantissa_bits) + mantissa), exponent - f.bias - f.mantissa_bits);
  return negative ? -value : value;
}

uint8_t encode(double v, const MiniFloat& f, bool saturate) {
  if (std::isnan(v)) return nan_of(f, std::signbit(v));
  const bool negative = std::signbit(v);
  const uint8_t sign = negative && !(f.fnuz && v == 0) ? sign_bit(f) : 0;
  const double a = std::fabs(v);
  const int min_exponent = 1 - f.bias;  // of the normal numbers; subnormals share its quantum
  int exponent = a == 0 ? min_exponent : std::max(std::ilogb(a), min_exponent);
  // Rounded (halves to even) as if the exponent had no top; a result past the largest value
  // overflows: 464 is e4m3fn's 448 (a tie to the even 448), 465 overflows, e4m3fnuz's 248
  // ties to 256 and overflows, as ONNX's and PyTorch's conversions do.
  const double quantum = std::ldexp(1.0, exponent - f.mantissa_bits);
  const double q = std::isinf(a) ? a : std::nearbyint(a / quantum) * quantum;
  if (q > f.largest) {
    if (saturate || !f.has_nan) return uint8_t(sign | encode(f.largest, f, true));
    if (f.has_infinity) return uint8_t(sign | (((1 << f.exponent_bits) - 1) << f.mantissa_bits));
    return nan_of(f, negative);
  }
  if (q == 0) return f.fnuz ? 0 : sign;  // fnuz has no -0 (0x80 is its NaN)
  exponent = std::ilogb(q);
  if (exponent < min_exponent)  // subnormal: exponent field 0
    return uint8_t(sign | int(q / std::ldexp(1.0, min_exponent - f.mantissa_bits)));
  const int mantissa = int(q / std::ldexp(1.0, exponent - f.mantissa_bits)) - (1 << f.mantissa_bits);
  return uint8_t(sign | ((exponent + f.bias) << f.mantissa_bits) | mantissa);
}

}  // namespace

int small_type_bits(DType dtype) {
  switch (dtype) {
    case DType::kF4E2M1:
    case DType::kI4:
    case DType::kU4: return 4;
    case DType::kI2:
    case DType::kU2: return 2;
    default: return 8;
  }
}

double small_type_to_double(uint8_t byte, DType dtype) {
  if (const MiniFloat* f = format_of(dtype)) return decode(byte, *f);
  if (dtype == DType::kI4 || dtype == DType::kI2) return double(int8_t(byte));  // held sign-extended
  return double(byte);
}

uint8_t small_type_from_double(double v, DType dtype, bool saturate) {
  if (const MiniFloat* f = format_of(dtype)) return encode(v, *f, saturate);
  // Integers: truncated toward zero (NaN as 0), then wrapped to the width, as ONNX's Cast
  // to int4 does (9 -> -7), and held sign-extended when signed.
  const int bits = small_type_bits(dtype);
  const int64_t i = std::isnan(v) ? 0 : v >= 0x1p62 ? 0 : v <= -0x1p62 ? 0 : int64_t(v);
  const uint8_t low = uint8_t(uint64_t(i) & ((uint64_t(1) << bits) - 1));
  if (dtype == DType::kI4 || dtype == DType::kI2)
    return uint8_t(int8_t(low << (8 - bits)) >> (8 - bits));
  return low;
}

}  // namespace strider
