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

// The path of an external data file named `location` relative to `base_dir`. Refused
// (INVALID_MODEL) when `location` is empty, absolute, contains "..", or resolves (through
// symlinks) outside `base_dir`: a model must not make strider read arbitrary files.
// INVALID_ARGUMENT when `base_dir` is empty (bytes imported without a folder).
Result<std::string> resolve_external_path(const std::string& base_dir, const std::string& location,
                                          const std::string& what);

// The folder holding `path` ("." for a bare file name).
std::string parent_folder(const std::string& path);

}  // namespace strider::onnx_io
