#include "strider/dtype.h"

#include "base/check.h"

namespace strider {

int64_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kF64:
    case DType::kI64:
    case DType::kU64: return 8;
    case DType::kF32:
    case DType::kI32:
    case DType::kU32: return 4;
    case DType::kF16:
    case DType::kBF16:
    case DType::kI16:
    case DType::kU16: return 2;
    case DType::kI8:
    case DType::kU8:
    case DType::kBool: return 1;
    default: return 1;  // the storage-only types: one byte each (base/small_types.h)
  }
  STRIDER_CHECK(false, "bad dtype {}", int(dtype));
}

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "f32";
    case DType::kF16: return "f16";
    case DType::kBF16: return "bf16";
    case DType::kF64: return "f64";
    case DType::kI64: return "i64";
    case DType::kI32: return "i32";
    case DType::kI8: return "i8";
    case DType::kU8: return "u8";
    case DType::kI16: return "i16";
    case DType::kU16: return "u16";
    case DType::kU32: return "u32";
    case DType::kU64: return "u64";
    case DType::kF8E4M3FN: return "f8e4m3fn";
    case DType::kF8E4M3FNUZ: return "f8e4m3fnuz";
    case DType::kF8E5M2: return "f8e5m2";
    case DType::kF8E5M2FNUZ: return "f8e5m2fnuz";
    case DType::kF4E2M1: return "f4e2m1";
    case DType::kI4: return "i4";
    case DType::kU4: return "u4";
    case DType::kI2: return "i2";
    case DType::kU2: return "u2";
    case DType::kBool: return "bool";
  }
  STRIDER_CHECK(false, "bad dtype {}", int(dtype));
}

std::optional<DType> parse_dtype(std::string_view name) {
  for (DType d : kAllDTypes)
    if (dtype_name(d) == name) return d;
  return std::nullopt;
}

}  // namespace strider
