// SHA-256 of a byte string, as lowercase hex (the same digest `sha256sum` prints), used
// to identify the model a check report belongs to.
#pragma once

#include <cstddef>
#include <span>
#include <string>

namespace strider {

std::string sha256_hex(std::span<const std::byte> data);

}  // namespace strider
