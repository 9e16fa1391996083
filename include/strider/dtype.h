// Element types strider stores and computes with.
//
// bf16 and f16 are storage types: kernels load them, compute in f32 and round on store,
// so bf16 arithmetic accumulates in f32. The integers of every width ONNX names (8 to 64
// bits, signed and unsigned) compute in their own type, wrapping as two's complement. The
// float8, float4 and 4- and 2-bit integer types are storage types only (base/small_types.h:
// one byte per element in strider's memory, converted by Cast). The enum is deliberately
// closed: an ONNX element type outside it (string, complex, float8e8m0) is reported as
// unsupported.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace strider {

enum class DType : uint8_t {
  kF32, kF16, kBF16, kF64, kI64, kI32, kI8, kU8, kBool, kI16, kU16, kU32, kU64,
  kF8E4M3FN, kF8E4M3FNUZ, kF8E5M2, kF8E5M2FNUZ, kF4E2M1, kI4, kU4, kI2, kU2,
};

inline constexpr DType kAllDTypes[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kF64,
                                       DType::kI64, DType::kI32, DType::kI16, DType::kI8,
                                       DType::kU64, DType::kU32, DType::kU16, DType::kU8,
                                       DType::kBool, DType::kF8E4M3FN, DType::kF8E4M3FNUZ,
                                       DType::kF8E5M2, DType::kF8E5M2FNUZ, DType::kF4E2M1,
                                       DType::kI4, DType::kU4, DType::kI2, DType::kU2};

// Bytes per element.
int64_t dtype_size(DType dtype);
// "f32", "bf16", "i64", "bool", ...
std::string_view dtype_name(DType dtype);
// Parses dtype_name()'s spelling; nullopt for anything else.
std::optional<DType> parse_dtype(std::string_view name);

// The storage-only types (base/small_types.h).
constexpr bool is_small_type(DType d) { return d >= DType::kF8E4M3FN; }
constexpr bool is_floating(DType d) {
  return d == DType::kF32 || d == DType::kF16 || d == DType::kBF16 || d == DType::kF64 ||
         (is_small_type(d) && d <= DType::kF4E2M1);
}
constexpr bool is_unsigned_integral(DType d) {
  return d == DType::kU64 || d == DType::kU32 || d == DType::kU16 || d == DType::kU8 || d == DType::kU4 ||
         d == DType::kU2;
}
constexpr bool is_integral(DType d) {
  return d == DType::kI64 || d == DType::kI32 || d == DType::kI16 || d == DType::kI8 || d == DType::kI4 ||
         d == DType::kI2 || is_unsigned_integral(d);
}

}  // namespace strider
