// RefTensor, widening and narrowing, and the numeric conversions Cast is defined by.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>

#include "base/check.h"
#include "base/float16.h"
#include "base/shape.h"
#include "base/small_types.h"
#include "reference/op_support.h"
#include "reference/reference.h"

namespace strider {

RefTensor RefTensor::zeros(DType dtype, Shape shape) {
  RefTensor t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  size_t count = size_t(strider::num_elements(t.shape));
  if (strider::is_floating(dtype)) {
    t.floats.assign(count, 0.0);
  } else {
    t.ints.assign(count, 0);
  }
  return t;
}

int64_t RefTensor::num_elements() const { return strider::num_elements(shape); }

double RefTensor::element_as_double(int64_t i) const {
  if (dtype == DType::kU64) return double(uint64_t(ints[size_t(i)]));  // held as its bit pattern
  return is_floating() ? floats[size_t(i)] : double(ints[size_t(i)]);
}

int64_t RefTensor::element_as_int(int64_t i) const {
  return is_floating() ? ref::truncate_to_int(floats[size_t(i)]) : ints[size_t(i)];
}

RefTensor ref_from_tensor(const Tensor& tensor) {
  RefTensor t = RefTensor::zeros(tensor.dtype(), tensor.shape());
  int64_t count = tensor.num_elements();
  if (t.is_floating()) {
    for (int64_t i = 0; i < count; ++i) t.floats[size_t(i)] = tensor.element_as_double(i);
  } else {
    for (int64_t i = 0; i < count; ++i) t.ints[size_t(i)] = tensor.element_as_int(i);
  }
  return t;
}

Tensor ref_to_tensor(const RefTensor& value, DType as) {
  // A value already of `as` is kept as it is (an e5m2 infinity stays one; Cast's
  // saturating conversion would make it the largest finite value).
  RefTensor converted = value.dtype == as ? value : RefTensor::zeros(as, value.shape);
  int64_t count = value.num_elements();
  if (value.dtype != as)
    for (int64_t i = 0; i < count; ++i) ref::convert_element(value, i, converted, i);
  Tensor out(as, value.shape);
  for (int64_t i = 0; i < count; ++i) {
    size_t k = size_t(i);
    switch (as) {
      // Values were rounded to the precision of `as`, so these conversions are exact.
      case DType::kF32: out.data<float>()[k] = float(converted.floats[k]); break;
      case DType::kF16: out.data<f16>()[k] = f16::from_float(float(converted.floats[k])); break;
      case DType::kBF16: out.data<bf16>()[k] = bf16::from_float(float(converted.floats[k])); break;
      case DType::kF64: out.data<double>()[k] = converted.floats[k]; break;
      case DType::kI64: out.data<int64_t>()[k] = converted.ints[k]; break;
      case DType::kI32: out.data<int32_t>()[k] = int32_t(converted.ints[k]); break;
      case DType::kI8: out.data<int8_t>()[k] = int8_t(converted.ints[k]); break;
      case DType::kU8:
      case DType::kBool: out.data<uint8_t>()[k] = uint8_t(converted.ints[k]); break;
      case DType::kI16: out.data<int16_t>()[k] = int16_t(converted.ints[k]); break;
      case DType::kU16: out.data<uint16_t>()[k] = uint16_t(converted.ints[k]); break;
      case DType::kU32: out.data<uint32_t>()[k] = uint32_t(converted.ints[k]); break;
      case DType::kU64: out.data<uint64_t>()[k] = uint64_t(converted.ints[k]); break;
      default:  // the storage-only types, already rounded or wrapped to their values
        out.data<uint8_t>()[k] = small_type_from_double(converted.element_as_double(int64_t(k)), as, false);
        break;
    }
  }
  return out;
}

namespace ref {
namespace {

// double -> float rounding to nearest even, with overflow to infinity made explicit
// (a C++ conversion of an out-of-range value is undefined).
float double_to_float_nearest(double v) {
  if (std::isnan(v)) return std::numeric_limits<float>::quiet_NaN();
  // Halfway between FLT_MAX and 2^128: a tie rounds to even, which is 2^128 (infinity).
  constexpr float kInf = std::numeric_limits<float>::infinity();
  if (std::fabs(v) >= 0x1.ffffffp127) return v > 0 ? kInf : -kInf;
  if (std::fabs(v) > double(FLT_MAX)) return v > 0 ? FLT_MAX : -FLT_MAX;
  return static_cast<float>(v);
}

// double -> float rounding to odd: truncate, then set the last bit if inexact. A later
// round-to-nearest-even to a format at least two bits narrower (f16, bf16) then equals
// the direct rounding of the double, which a plain double->float->f16 would not.
float double_to_float_odd(double v) {
  if (std::isnan(v) || std::isinf(v)) return double_to_float_nearest(v);
  float f = double_to_float_nearest(v);
  if (std::isinf(f)) f = v > 0 ? FLT_MAX : -FLT_MAX;
  if (std::fabs(double(f)) > std::fabs(v)) f = std::nextafter(f, 0.0f);
  if (double(f) == v) return f;
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  bits |= 1u;
  std::memcpy(&f, &bits, sizeof bits);
  return f;
}

}  // namespace

int64_t wrap_to_dtype(int64_t v, DType dtype) {
  switch (dtype) {
    case DType::kI32: return int32_t(uint32_t(uint64_t(v)));
    case DType::kI8: return int8_t(uint8_t(uint64_t(v)));
    case DType::kU8: return uint8_t(uint64_t(v));
    case DType::kI16: return int16_t(uint16_t(uint64_t(v)));
    case DType::kU16: return uint16_t(uint64_t(v));
    case DType::kU32: return uint32_t(uint64_t(v));
    case DType::kBool: return v != 0;
    case DType::kI4:
    case DType::kI2:
    case DType::kU4:
    case DType::kU2: return int64_t(small_type_to_double(small_type_from_double(double(v & 0xff), dtype), dtype));
    default: return v;
  }
}

double round_to_precision(double v, DType dtype) {
  switch (dtype) {
    case DType::kF32: return double_to_float_nearest(v);
    case DType::kF16: return f16::from_float(double_to_float_odd(v)).to_float();
    case DType::kBF16: return bf16::from_float(double_to_float_odd(v)).to_float();
    default: return is_small_type(dtype) ? small_type_to_double(small_type_from_double(v, dtype), dtype) : v;
  }
}

int64_t integer_lowest(DType dtype) {
  switch (dtype) {
    case DType::kI32: return std::numeric_limits<int32_t>::min();
    case DType::kI8: return std::numeric_limits<int8_t>::min();
    case DType::kI16: return std::numeric_limits<int16_t>::min();
    case DType::kI4: return -8;
    case DType::kI2: return -2;
    case DType::kU8:
    case DType::kU4:
    case DType::kU2:
    case DType::kU16:
    case DType::kU32:
    case DType::kU64:
    case DType::kBool: return 0;
    default: return std::numeric_limits<int64_t>::min();
  }
}

int64_t integer_highest(DType dtype) {
  switch (dtype) {
    case DType::kI32: return std::numeric_limits<int32_t>::max();
    case DType::kI8: return std::numeric_limits<int8_t>::max();
    case DType::kU8: return std::numeric_limits<uint8_t>::max();
    case DType::kI16: return std::numeric_limits<int16_t>::max();
    case DType::kU16: return std::numeric_limits<uint16_t>::max();
    case DType::kU32: return std::numeric_limits<uint32_t>::max();
    case DType::kI4: return 7;
    case DType::kU4: return 15;
    case DType::kI2: return 1;
    case DType::kU2: return 3;
    case DType::kBool: return 1;
    // u64 is held as int64 bit patterns; the largest value ordered as an int64 is the
    // largest a saturation can give (the quantizing ops, the only users, never target u64).
    default: return std::numeric_limits<int64_t>::max();
  }
}

int64_t truncate_to_int(double v) {
  if (std::isnan(v)) return 0;
  if (v >= 0x1p63) return std::numeric_limits<int64_t>::max();
  if (v < -0x1p63) return std::numeric_limits<int64_t>::min();
  return int64_t(v);
}

int64_t saturate_to_dtype(double v, DType dtype) {
  if (std::isnan(v)) return 0;
  return std::clamp(truncate_to_int(v), integer_lowest(dtype), integer_highest(dtype));
}

void convert_element(const RefTensor& from, int64_t i, RefTensor& out, int64_t j) {
  size_t src = size_t(i), dst = size_t(j);
  if (out.is_floating()) {
    double v = from.element_as_double(i);
    out.floats[dst] = round_to_precision(v, out.dtype);
  } else if (out.dtype == DType::kBool) {
    out.ints[dst] = from.is_floating() ? from.floats[src] != 0.0 : from.ints[src] != 0;
  } else {
    int64_t v = from.is_floating() ? truncate_to_int(from.floats[src]) : from.ints[src];
    // A u64 in [2^63, 2^64) is held as its bit pattern; int64 saturation would cap it.
    if (out.dtype == DType::kU64 && from.is_floating() && from.floats[src] >= 0x1p63)
      v = from.floats[src] < 0x1p64 ? int64_t(uint64_t(from.floats[src])) : -1;
    out.ints[dst] = wrap_to_dtype(v, out.dtype);
  }
}

}  // namespace ref
}  // namespace strider
