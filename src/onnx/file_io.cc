#include "onnx/file_io.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>

namespace strider::onnx_io {
namespace fs = std::filesystem;

namespace {

// Checks that `path` is an existing regular file and returns its size.
Result<int64_t> regular_file_size(const std::string& path, const std::string& what) {
  std::error_code ec;
  fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st)) {
    if (ec && ec != std::errc::no_such_file_or_directory)
      return io_error(fmt::format("{}: cannot access '{}': {}", what, path, ec.message()));
    return not_found(fmt::format("{}: file '{}' not found", what, path));
  }
  if (!fs::is_regular_file(st))
    return invalid_argument(fmt::format("{}: '{}' is not a regular file", what, path));
  uintmax_t size = fs::file_size(path, ec);
  if (ec)
    return io_error(fmt::format("{}: cannot read the size of '{}': {}", what, path, ec.message()));
  return int64_t(size);
}

}  // namespace

Result<std::vector<std::byte>> read_file(const std::string& path, const std::string& what) {
  STRIDER_ASSIGN_OR_RETURN(int64_t size, regular_file_size(path, what));
  return read_file_range(path, 0, size, what);
}

Result<std::vector<std::byte>> read_file_range(const std::string& path, int64_t offset,
                                               int64_t length, const std::string& what) {
  STRIDER_ASSIGN_OR_RETURN(int64_t size, regular_file_size(path, what));
  if (offset < 0 || length < 0 || offset > size || length > size - offset)
    return invalid_model(fmt::format("{}: needs bytes [{}, {}) of '{}', which has {} bytes", what,
                                     offset, offset + length, path, size));
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return io_error(fmt::format("{}: cannot open '{}': {}", what, path, std::strerror(errno)));
  std::vector<std::byte> bytes(static_cast<size_t>(length));
  in.seekg(std::streamoff(offset));
  if (length > 0) in.read(reinterpret_cast<char*>(bytes.data()), std::streamsize(length));
  if (!in || in.gcount() != std::streamsize(length))
    return io_error(fmt::format("{}: reading {} bytes at offset {} of '{}' failed", what, length,
                                offset, path));
  return bytes;
}

Status write_file(const std::string& path, std::span<const std::byte> bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return io_error(fmt::format("cannot create '{}': {}", path, std::strerror(errno)));
  out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  out.close();
  if (!out) return io_error(fmt::format("writing '{}' failed: {}", path, std::strerror(errno)));
  return Status::ok();
}

Result<std::string> resolve_external_path(const std::string& base_dir, const std::string& location,
                                          const std::string& what) {
  if (location.empty())
    return invalid_model(fmt::format("{}: external data has no 'location'", what));
  if (base_dir.empty())
    return invalid_argument(fmt::format(
        "{}: external data '{}' cannot be resolved: no model folder was given", what, location));
  fs::path loc(location);
  if (loc.is_absolute() || loc.has_root_name() || loc.has_root_directory())
    return invalid_model(fmt::format(
        "{}: external data location '{}' is absolute; it must be relative to the model's folder",
        what, location));
  for (const fs::path& part : loc)
    if (part == "..")
      return invalid_model(
          fmt::format("{}: external data location '{}' leaves the model's folder", what, location));
  std::error_code ec;
  fs::path base = fs::weakly_canonical(fs::path(base_dir), ec);
  if (ec)
    return io_error(
        fmt::format("{}: cannot resolve folder '{}': {}", what, base_dir, ec.message()));
  if (!base.has_filename()) base = base.parent_path();  // "dir/" -> "dir"
  fs::path full = fs::weakly_canonical(base / loc, ec);
  if (ec) return io_error(fmt::format("{}: cannot resolve '{}': {}", what, location, ec.message()));
  // Symlinks are resolved by weakly_canonical: the real file must still lie under base.
  auto base_end = std::mismatch(base.begin(), base.end(), full.begin(), full.end()).first;
  if (base_end != base.end())
    return invalid_model(fmt::format(
        "{}: external data location '{}' resolves to '{}', outside the model's folder '{}'", what,
        location, full.string(), base.string()));
  return full.string();
}

std::string parent_folder(const std::string& path) {
  fs::path parent = fs::path(path).parent_path();
  return parent.empty() ? std::string(".") : parent.string();
}

}  // namespace strider::onnx_io
