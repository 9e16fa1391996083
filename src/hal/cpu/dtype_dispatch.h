// Compile-time element types for CPU kernels: dispatch from a runtime DType to a template,
// and the load/store rules (bf16 and f16 compute in f32; bool is stored as one byte 0/1).
#pragma once

#include <cstdint>
#include <type_traits>

#include "base/float16.h"
#include "strider/dtype.h"
#include "strider/status.h"

namespace strider::cpu {

// The type arithmetic happens in for each storage type.
template <typename T> struct ComputeTypeOf { using type = T; };
template <> struct ComputeTypeOf<bf16> { using type = float; };
template <> struct ComputeTypeOf<f16> { using type = float; };
template <typename T> using ComputeType = typename ComputeTypeOf<T>::type;

template <typename T>
inline ComputeType<T> load(T v) {
  if constexpr (std::is_same_v<T, bf16> || std::is_same_v<T, f16>) return v.to_float();
  else return v;
}
template <typename T, typename C>
inline T store(C v) {
  if constexpr (std::is_same_v<T, bf16> || std::is_same_v<T, f16>) return T::from_float(float(v));
  else return T(v);
}

template <typename T> constexpr bool is_float_storage_v =
    std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, bf16> ||
    std::is_same_v<T, f16>;

// Calls fn.template operator()<T>() with T the storage type of `dtype`.
template <typename Fn>
decltype(auto) dispatch_dtype(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::kF32: return fn.template operator()<float>();
    case DType::kF16: return fn.template operator()<f16>();
    case DType::kBF16: return fn.template operator()<bf16>();
    case DType::kF64: return fn.template operator()<double>();
    case DType::kI64: return fn.template operator()<int64_t>();
    case DType::kI32: return fn.template operator()<int32_t>();
    case DType::kI8: return fn.template operator()<int8_t>();
    case DType::kU8: return fn.template operator()<uint8_t>();
    case DType::kBool: return fn.template operator()<bool>();
    case DType::kI16: return fn.template operator()<int16_t>();
    case DType::kU16: return fn.template operator()<uint16_t>();
    case DType::kU32: return fn.template operator()<uint32_t>();
    case DType::kU64: return fn.template operator()<uint64_t>();
    default: break;
  }
  // The storage-only types (one byte each) as their bytes: only the kernels that move bytes
  // see them (cpu_kernels.cc refuses them to every other kernel).
  if (is_small_type(dtype)) return fn.template operator()<uint8_t>();
  return fn.template operator()<float>();
}

// Reads one element of any dtype as double (slow path for rarely mixed operands).
double read_as_double(const std::byte* p, DType dtype);

}  // namespace strider::cpu
