// Whole-file reads and writes, and the containment rule for external tensor data.
//
// Every call reports failures as a Status naming the path (no exceptions: std::filesystem
// is used through its error_code overloads). These are internal helpers of strider_onnx.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "strider/status.h"

namespace strider::onnx_io {

// The bytes of `path`. NOT_FOUND if it does not exist, INVALID_ARGUMENT if it is not a
// regular file, IO_ERROR if reading fails. `what` prefixes messages ("model 'm.onnx'").
Result<std::vector<std::byte>> read_file(const std::string& path, const std::string& what);

// `length` bytes of `path` starting at `offset`; INVALID_MODEL if the file is shorter.
Result<std::vector<std::byte>> read_file_range(const std::string& path, int64_t offset,
                                               int64_t length, const std::string& what);

// Writes (replaces) `path` with `bytes`; IO_ERROR naming the path on failure.
Status write_file(const std::string& path, std::span<const std::byte> bytes);

// The bytes [offset, offset + length) of the external data file `location`, relative to
// the folder `base_dir`. Refused (INVALID_MODEL) when `location` is empty, holds a NUL,
// is absolute, has a ".." part, or any part of it is a symbolic link, or the file is not
// a regular file (a FIFO, a device) or is shorter than the range. The file is opened by
// walking from the folder's descriptor with O_NOFOLLOW (openat), checked through the
// opened descriptor (fstat) and read from it (pread), so nothing can be swapped in
// between the check and the read. INVALID_ARGUMENT when `base_dir` is empty.
Result<std::vector<std::byte>> read_external_data(const std::string& base_dir, const std::string& location,
                                                  int64_t offset, int64_t length, const std::string& what);

// The folder holding `path` ("." for a bare file name).
std::string parent_folder(const std::string& path);

}  // namespace strider::onnx_io
