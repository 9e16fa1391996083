// Tensor files by extension: ".npy" (NumPy, src/onnx/npy.h) or ".pb" (a serialized ONNX
// TensorProto, src/onnx/tensor_proto.h). This is what the CLI and tests use for inputs,
// expected outputs and dumps.
#pragma once

#include <string>

#include "strider/status.h"
#include "strider/tensor.h"

namespace strider {

// INVALID_ARGUMENT listing the accepted extensions when `path` has neither.
Result<Tensor> read_tensor_file(const std::string& path);
// `name` is stored in a .pb file's TensorProto; .npy files have no name.
Status write_tensor_file(const std::string& path, const Tensor& tensor, const std::string& name);

}  // namespace strider
