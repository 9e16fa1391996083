// NumPy .npy files (format versions 1.0, 2.0 and 3.0).
//
// Supported dtypes: '<f4' '<f8' '<f2' '<i8' '<i4' '|i1' '|u1' '|b1' ('=' is accepted as
// little-endian, the only byte order strider runs on). A fortran_order file is read
// correctly: its data is transposed into the row-major Tensor. Big-endian files,
// structured dtypes and other element types are UNSUPPORTED; malformed or truncated files
// are INVALID_ARGUMENT naming the file. Nothing is allocated before the file is known to
// hold the data its header promises.
#pragma once

#include <cstddef>
#include <span>
#include <string>

#include "strider/status.h"
#include "strider/tensor.h"

namespace strider {

Result<Tensor> read_npy(const std::string& path);
// The same from the file's bytes; `what` names it in messages ("npy file 'x.npy'").
Result<Tensor> parse_npy(std::span<const std::byte> bytes, const std::string& what);
// Writes a version 1.0 file (2.0 if the header needs it), C order. bf16 has no NumPy dtype:
// UNSUPPORTED (convert to f32 first).
Status write_npy(const std::string& path, const Tensor& tensor);

}  // namespace strider
