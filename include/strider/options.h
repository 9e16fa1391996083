// Typed choices a session takes (SessionOptions), with their spellings for the CLI and
// Python, which turn text into these once, at their boundary.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace strider {

// Memory layout of activations: row-major (nchw), channels-last strides (nhwc; logical
// shapes stay in ONNX order), or auto: nhwc for convolution-heavy graphs on a device that
// runs them faster so.
enum class Layout : uint8_t { kNchw, kNhwc, kAuto };
// "nchw", "nhwc", "auto".
std::string_view layout_name(Layout layout);
std::optional<Layout> parse_layout(std::string_view text);

// cuda: where allocations live: device memory (cudaMalloc), unified (cudaMallocManaged) or
// pinned host memory mapped into the GPU. A performance choice, never a correctness knob
// (docs/MEMORY_MODEL.md rule 4): every mode computes the same results.
enum class StorageMode : uint8_t { kDevice, kUnified, kHost };
// "device", "unified", "host".
std::string_view storage_mode_name(StorageMode mode);
std::optional<StorageMode> parse_storage_mode(std::string_view text);

// Parses "1GiB", "512MiB", "64M", "1000000", "2.5G" (binary multiples for K/M/G/T with or
// without "iB"); nullopt for anything else or a size beyond 2^62.
std::optional<int64_t> parse_byte_size(std::string_view text);
// What a session may use when its options give no budget: 80% of physical memory.
int64_t default_host_memory_budget();

}  // namespace strider
