#include "strider/tensor_file.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "onnx/npy.h"
#include "onnx/tensor_proto.h"

namespace strider {
namespace {

enum class Format { kNpy, kPb };

Result<Format> format_of(const std::string& path) {
  std::string ext = std::filesystem::path(path).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return char(std::tolower(c)); });
  if (ext == ".npy") return Format::kNpy;
  if (ext == ".pb") return Format::kPb;
  return invalid_argument(
      fmt::format("tensor file '{}': unknown extension '{}' (accepted: .npy, .pb)", path, ext));
}

}  // namespace

// A caller's tensor file that is malformed or holds what strider lacks (a complex dtype,
// external data) is bad input, whatever the reader called it: INVALID_ARGUMENT.
Result<Tensor> read_tensor_file(const std::string& path) {
  STRIDER_ASSIGN_OR_RETURN(Format format, format_of(path));
  Result<Tensor> t = format == Format::kNpy ? read_npy(path) : read_tensor_pb(path);
  StatusCode code = t.status().code();
  if (code == StatusCode::kInvalidModel || code == StatusCode::kUnsupported || code == StatusCode::kOutOfRange)
    return invalid_argument(t.status().message());
  return t;
}

Status write_tensor_file(const std::string& path, const Tensor& tensor, const std::string& name) {
  STRIDER_ASSIGN_OR_RETURN(Format format, format_of(path));
  return format == Format::kNpy ? write_npy(path, tensor) : write_tensor_pb(path, tensor, name);
}

}  // namespace strider
