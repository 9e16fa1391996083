// Checked 64-bit arithmetic for every size, count and offset a model can influence.
//
// Why: a model is a stranger's file. A dim of 2^62 times 4 wraps to 0 in int64, a Range
// from 0 to INT64_MIN by -1 divides into a trap, and a float that is NaN casts to any
// integer at all. Every such product, sum or conversion goes through these helpers, which
// report overflow instead of wrapping; the caller turns it into INVALID_MODEL (or
// INVALID_ARGUMENT for a caller's value) naming the node and the value.
//
// The bound: no tensor strider describes exceeds kMaxTensorBytes (2^52 bytes, 4 PiB), far
// beyond any real memory, so once every value of a graph is validated against it (shape
// inference does), element counts, byte sizes and view footprints of those values cannot
// overflow, and the unchecked arithmetic of kernels on validated views is safe.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <type_traits>

#include "base/wrapping_math.h"

namespace strider {

inline constexpr int64_t kMaxTensorBytes = int64_t(1) << 52;

inline std::optional<int64_t> checked_add(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}
inline std::optional<int64_t> checked_sub(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_sub_overflow(a, b, &r)) return std::nullopt;
  return r;
}
inline std::optional<int64_t> checked_mul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

// A value in checked arithmetic: once an operation overflows (or divides by zero, or
// divides INT64_MIN by -1), the result stays invalid. Lets geometry read like the formula:
//   CheckedInt span = CheckedInt(in) + pad_begin + pad_end - effective;
//   if (!span.ok()) return node.error(...);
class CheckedInt {
 public:
  CheckedInt(int64_t v) : value_(v) {}  // NOLINT(google-explicit-constructor)
  static CheckedInt invalid() {
    CheckedInt c(0);
    c.ok_ = false;
    return c;
  }
  bool ok() const { return ok_; }
  // The value; only meaningful when ok().
  int64_t value() const { return value_; }
  std::optional<int64_t> get() const { return ok_ ? std::optional<int64_t>(value_) : std::nullopt; }

  friend CheckedInt operator+(CheckedInt a, CheckedInt b) { return a.apply(b, checked_add(a.value_, b.value_)); }
  friend CheckedInt operator-(CheckedInt a, CheckedInt b) { return a.apply(b, checked_sub(a.value_, b.value_)); }
  friend CheckedInt operator*(CheckedInt a, CheckedInt b) { return a.apply(b, checked_mul(a.value_, b.value_)); }
  // Truncating division (C++'s), like the formulas it replaces.
  friend CheckedInt operator/(CheckedInt a, CheckedInt b) {
    bool bad = b.value_ == 0 || (a.value_ == std::numeric_limits<int64_t>::min() && b.value_ == -1);
    return a.apply(b, bad ? std::nullopt : std::optional<int64_t>(a.value_ / b.value_));
  }
  friend CheckedInt operator%(CheckedInt a, CheckedInt b) {
    bool bad = b.value_ == 0 || (a.value_ == std::numeric_limits<int64_t>::min() && b.value_ == -1);
    return a.apply(b, bad ? std::nullopt : std::optional<int64_t>(a.value_ % b.value_));
  }
  CheckedInt& operator+=(CheckedInt b) { return *this = *this + b; }
  CheckedInt& operator*=(CheckedInt b) { return *this = *this * b; }

 private:
  CheckedInt apply(CheckedInt other, std::optional<int64_t> r) const {
    if (!ok_ || !other.ok_ || !r) return invalid();
    return CheckedInt(*r);
  }
  int64_t value_ = 0;
  bool ok_ = true;
};

// ceil(a / b) for b > 0, in checked arithmetic.
inline CheckedInt checked_ceil_div(CheckedInt a, int64_t b) {
  if (!a.ok() || b <= 0) return CheckedInt::invalid();
  int64_t q = a.value() / b, r = a.value() % b;
  return CheckedInt(q) + CheckedInt(r > 0 ? 1 : 0);
}

// The element count of `sizes` when every dim is >= 0 and count * element_size is at
// most kMaxTensorBytes; nullopt otherwise. An empty tensor's other dims count too (as if
// the zero were a one): its strides are still computed from them and must not overflow.
inline std::optional<int64_t> checked_element_count(std::span<const int64_t> sizes, int64_t element_size) {
  int64_t extent = 1;  // the product with every zero counted as one
  bool empty = false;
  for (int64_t d : sizes) {
    if (d < 0) return std::nullopt;
    empty = empty || d == 0;
    auto next = checked_mul(extent, d == 0 ? 1 : d);
    if (!next || *next > kMaxTensorBytes / element_size) return std::nullopt;
    extent = *next;
  }
  return empty ? 0 : extent;
}

// `v` as an int64 when it is finite and inside [lo, hi]; nullopt for NaN, infinities and
// anything outside (a plain cast of those is undefined behaviour).
inline std::optional<int64_t> checked_double_to_int(double v, int64_t lo = std::numeric_limits<int64_t>::min(),
                                                    int64_t hi = std::numeric_limits<int64_t>::max()) {
  // 2^63 is exactly representable; every double below it converts without overflow.
  if (!std::isfinite(v) || v < -9223372036854775808.0 || v >= 9223372036854775808.0) return std::nullopt;
  int64_t i = int64_t(v);
  if (i < lo || i > hi) return std::nullopt;
  return i;
}

// A float as integer type I, defined for every input: truncated toward zero, NaN as 0,
// out-of-range values saturated (a plain conversion of those is undefined behaviour; the
// GPU's cvt instructions saturate the same way).
template <class I, class F>
I saturate_to_int(F x) {
  if (std::isnan(x)) return I(0);
  if (double(x) >= double(std::numeric_limits<I>::max())) return std::numeric_limits<I>::max();
  if (double(x) <= double(std::numeric_limits<I>::lowest())) return std::numeric_limits<I>::lowest();
  return I(x);
}

}  // namespace strider
