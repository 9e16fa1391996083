// ONNX TensorProto <-> strider Tensor, and serialized TensorProto files (the ONNX test
// layout: test_data_set_0/input_0.pb).
//
// Import accepts every storage ONNX allows for the supported element types: raw_data
// (little-endian), the typed fields (float_data, int32_data -- which holds f16/bf16 bit
// patterns and int8/uint8/bool values one per entry --, int64_data, double_data) and
// external data files. The element count is checked against dims whatever the source, and
// nothing larger than the data actually present is ever allocated, so a corrupt tensor
// gives a Status, never a crash or a huge allocation.
#pragma once

#include <onnx/onnx_pb.h>

#include <optional>
#include <span>
#include <string>

#include "base/onnx_types.h"  // onnx_type_name(int): "FLOAT8E4M3FN", ...
#include "strider/status.h"
#include "strider/tensor.h"

namespace strider {

// ONNX TensorProto.DataType -> DType; nullopt for element types strider does not have.
// (The codes and names live in base/onnx_types.h, free of protobuf; these are aliases.)
inline std::optional<DType> dtype_from_onnx(int onnx_type) {
  return dtype_from_onnx_code(onnx_type);
}
// DType -> TensorProto.DataType.
inline int onnx_type_from_dtype(DType dtype) { return onnx_type_code(dtype); }

// Converts `proto` to a Tensor. External data is read from files under `base_dir` (see
// onnx_io::read_external_data for what is refused); an empty base_dir refuses external
// data. `what` names the tensor in messages ("initializer 'w'"); if empty, the proto's
// name is used. UNSUPPORTED for element types strider lacks and for segmented tensors;
// INVALID_MODEL for negative dims or an element count that does not match dims.
Result<Tensor> tensor_from_proto(const onnx::TensorProto& proto, const std::string& base_dir,
                                 const std::string& what);

// A TensorProto holding `tensor` in raw_data (little-endian), named `name`.
onnx::TensorProto tensor_to_proto(const Tensor& tensor, const std::string& name);

// Reads a file holding one serialized TensorProto; external data resolves relative to the
// file's folder. NOT_FOUND if missing, INVALID_ARGUMENT if not a TensorProto.
Result<Tensor> read_tensor_pb(const std::string& path);
// The same from the file's bytes; external data resolves in `base_dir` (empty: refused).
Result<Tensor> parse_tensor_pb(std::span<const std::byte> bytes, const std::string& base_dir, const std::string& what);
// Writes `tensor` as a serialized TensorProto named `name` (raw_data).
Status write_tensor_pb(const std::string& path, const Tensor& tensor, const std::string& name);

}  // namespace strider
