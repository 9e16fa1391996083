#include "base/onnx_types.h"

#include <array>

namespace strider {
namespace {

constexpr std::array<std::string_view, 27> kNames = {
    "UNDEFINED",    "FLOAT",         "UINT8",      "INT8",           "UINT16",      "INT16",
    "INT32",        "INT64",         "STRING",     "BOOL",           "FLOAT16",     "DOUBLE",
    "UINT32",       "UINT64",        "COMPLEX64",  "COMPLEX128",     "BFLOAT16",    "FLOAT8E4M3FN",
    "FLOAT8E4M3FNUZ", "FLOAT8E5M2",  "FLOAT8E5M2FNUZ", "UINT4",      "INT4",        "FLOAT4E2M1",
    "FLOAT8E8M0",   "UINT2",         "INT2"};

}  // namespace

int onnx_type_code(DType dtype) {
  switch (dtype) {
    case DType::kF32: return 1;
    case DType::kU8: return 2;
    case DType::kI8: return 3;
    case DType::kI32: return 6;
    case DType::kI64: return 7;
    case DType::kBool: return 9;
    case DType::kF16: return 10;
    case DType::kF64: return 11;
    case DType::kBF16: return 16;
    case DType::kU16: return 4;
    case DType::kI16: return 5;
    case DType::kU32: return 12;
    case DType::kU64: return 13;
    case DType::kF8E4M3FN: return 17;
    case DType::kF8E4M3FNUZ: return 18;
    case DType::kF8E5M2: return 19;
    case DType::kF8E5M2FNUZ: return 20;
    case DType::kU4: return 21;
    case DType::kI4: return 22;
    case DType::kF4E2M1: return 23;
    case DType::kU2: return 25;
    case DType::kI2: return 26;
  }
  return 0;
}

std::optional<DType> dtype_from_onnx_code(int code) {
  switch (code) {
    case 1: return DType::kF32;
    case 2: return DType::kU8;
    case 3: return DType::kI8;
    case 6: return DType::kI32;
    case 7: return DType::kI64;
    case 9: return DType::kBool;
    case 10: return DType::kF16;
    case 11: return DType::kF64;
    case 16: return DType::kBF16;
    case 4: return DType::kU16;
    case 5: return DType::kI16;
    case 12: return DType::kU32;
    case 13: return DType::kU64;
    case 17: return DType::kF8E4M3FN;
    case 18: return DType::kF8E4M3FNUZ;
    case 19: return DType::kF8E5M2;
    case 20: return DType::kF8E5M2FNUZ;
    case 21: return DType::kU4;
    case 22: return DType::kI4;
    case 23: return DType::kF4E2M1;
    case 25: return DType::kU2;
    case 26: return DType::kI2;
    default: return std::nullopt;
  }
}

std::string_view onnx_type_name(int code) {
  if (code >= 0 && size_t(code) < kNames.size()) return kNames[size_t(code)];
  return "unknown ONNX type";
}

}  // namespace strider
