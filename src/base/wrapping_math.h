// Integer arithmetic that wraps in two's complement, as every ONNX runtime's integer ops do
// in practice (C++ makes signed overflow undefined behaviour, so it is done in uint64).
// Floats pass through unchanged. Host and device (the elementwise functors use them).
#pragma once

#include <cstdint>
#include <type_traits>

#include "base/host_device.h"

namespace strider {

template <class C>
STRIDER_HOST_DEVICE C wrapping_add(C a, C b) {
  if constexpr (std::is_integral_v<C>) return C(uint64_t(a) + uint64_t(b));
  else return C(a + b);
}
template <class C>
STRIDER_HOST_DEVICE C wrapping_sub(C a, C b) {
  if constexpr (std::is_integral_v<C>) return C(uint64_t(a) - uint64_t(b));
  else return C(a - b);
}
template <class C>
STRIDER_HOST_DEVICE C wrapping_mul(C a, C b) {
  if constexpr (std::is_integral_v<C>) return C(uint64_t(a) * uint64_t(b));
  else return C(a * b);
}
template <class C>
STRIDER_HOST_DEVICE C wrapping_neg(C a) {
  if constexpr (std::is_integral_v<C>) return C(uint64_t(0) - uint64_t(a));
  else return C(-a);
}

}  // namespace strider
