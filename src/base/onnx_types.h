// ONNX TensorProto.DataType codes and their mapping to strider's DType. Kept here, free of
// protobuf, because attributes (Cast's `to`) carry these codes as plain integers.
#pragma once

#include <optional>
#include <string_view>

#include "strider/dtype.h"

namespace strider {

// The ONNX element type code for a DType (FLOAT = 1, ..., BFLOAT16 = 16).
int onnx_type_code(DType dtype);
// The DType for an ONNX element type code; nullopt for types strider does not have.
std::optional<DType> dtype_from_onnx_code(int code);
// "FLOAT", "FLOAT8E4M3FN", ...; "unknown ONNX type" for codes past the known ones.
std::string_view onnx_type_name(int code);

}  // namespace strider
