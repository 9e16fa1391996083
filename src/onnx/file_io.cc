#include "onnx/file_io.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>
#include <utility>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "strider/printable.h"

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

namespace {

// A file descriptor closed when it goes out of scope.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept {
    std::swap(fd_, other.fd_);
    return *this;
  }
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

// The parts of `location` after the containment rules: relative, no "..", no NUL.
Result<std::vector<std::string>> location_parts(const std::string& location, const std::string& what) {
  if (location.empty()) return invalid_model(fmt::format("{}: external data has no 'location'", what));
  if (location.find('\0') != std::string::npos)
    return invalid_model(fmt::format("{}: external data location '{}' contains a NUL byte", what,
                                     printable(location)));
  if (location.front() == '/')
    return invalid_model(fmt::format(
        "{}: external data location '{}' is absolute; it must be relative to the model's folder", what,
        printable(location)));
  std::vector<std::string> parts;
  for (size_t start = 0; start <= location.size();) {
    size_t end = std::min(location.find('/', start), location.size());
    std::string part = location.substr(start, end - start);
    if (part == "..")
      return invalid_model(
          fmt::format("{}: external data location '{}' leaves the model's folder", what, printable(location)));
    if (!part.empty() && part != ".") parts.push_back(std::move(part));
    start = end + 1;
  }
  if (parts.empty()) return invalid_model(fmt::format("{}: external data location '{}' names no file", what, location));
  return parts;
}

Status open_error(int error, const std::string& location, const std::string& part, const std::string& what) {
  std::string where = fmt::format("{}: external data '{}'", what, printable(location));
  if (error == ELOOP || error == ENOTDIR)
    return invalid_model(fmt::format("{}: '{}' is a symbolic link or not a folder; strider reads only regular "
                                     "files inside the model's folder",
                                     where, printable(part)));
  if (error == ENOENT) return invalid_model(fmt::format("{}: '{}' does not exist in the model's folder", where, printable(part)));
  return io_error(fmt::format("{}: cannot open '{}': {}", where, printable(part), std::strerror(error)));
}

// Walks `parts` from the model folder's descriptor with O_NOFOLLOW at every step, so the
// file opened is the one checked: no symlink (swapped in or not) leads outside.
Result<Fd> open_inside(const std::string& base_dir, const std::vector<std::string>& parts,
                       const std::string& location, const std::string& what) {
  Fd dir(::open(base_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir.get() < 0)
    return io_error(fmt::format("{}: cannot open the model's folder '{}': {}", what, base_dir, std::strerror(errno)));
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    Fd next(::openat(dir.get(), parts[i].c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (next.get() < 0) return open_error(errno, location, parts[i], what);
    dir = std::move(next);
  }
  // O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below.
  Fd file(::openat(dir.get(), parts.back().c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (file.get() < 0) return open_error(errno, location, parts.back(), what);
  struct stat st {};
  if (::fstat(file.get(), &st) != 0)
    return io_error(fmt::format("{}: cannot stat external data '{}': {}", what, printable(location), std::strerror(errno)));
  if (!S_ISREG(st.st_mode))
    return invalid_model(fmt::format("{}: external data '{}' is not a regular file", what, printable(location)));
  return file;
}

}  // namespace

Result<std::vector<std::byte>> read_external_data(const std::string& base_dir, const std::string& location,
                                                  int64_t offset, int64_t length, const std::string& what) {
  STRIDER_ASSIGN_OR_RETURN(std::vector<std::string> parts, location_parts(location, what));
  if (base_dir.empty())
    return invalid_argument(fmt::format(
        "{}: external data '{}' cannot be resolved: no model folder was given", what, printable(location)));
  STRIDER_ASSIGN_OR_RETURN(Fd file, open_inside(base_dir, parts, location, what));
  struct stat st {};
  if (::fstat(file.get(), &st) != 0)
    return io_error(fmt::format("{}: cannot stat external data '{}': {}", what, printable(location), std::strerror(errno)));
  int64_t size = int64_t(st.st_size);
  if (offset < 0 || length < 0 || offset > size || length > size - offset)
    return invalid_model(fmt::format("{}: needs {} bytes at offset {} of external data '{}', which has {} bytes", what,
                                     length, offset, printable(location), size));
  std::vector<std::byte> bytes(static_cast<size_t>(length));
  for (int64_t done = 0; done < length;) {
    ssize_t n = ::pread(file.get(), bytes.data() + done, size_t(length - done), off_t(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      return io_error(fmt::format("{}: reading {} bytes at offset {} of external data '{}' failed{}{}", what, length,
                                  offset, printable(location), n < 0 ? ": " : "", n < 0 ? std::strerror(errno) : ""));
    done += n;
  }
  return bytes;
}

std::string parent_folder(const std::string& path) {
  fs::path parent = fs::path(path).parent_path();
  return parent.empty() ? std::string(".") : parent.string();
}

}  // namespace strider::onnx_io
