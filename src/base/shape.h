// Shapes and strides: element counts, outermost dimension first (ONNX order).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace strider {

using Shape = std::vector<int64_t>;
using Strides = std::vector<int64_t>;

// Product of the sizes; 1 for a scalar (rank 0).
int64_t num_elements(std::span<const int64_t> sizes);
// Row-major strides of a dense tensor of these sizes.
Strides contiguous_strides(std::span<const int64_t> sizes);
// "[2, 3, 4]" (a scalar is "[]").
std::string shape_to_string(std::span<const int64_t> sizes);
// "2x3x4" (a scalar is "scalar").
std::string shape_to_dims(std::span<const int64_t> sizes);
// numpy broadcasting of two shapes; false if they do not broadcast.
bool broadcast_shapes(std::span<const int64_t> a, std::span<const int64_t> b, Shape* out);
// Normalizes an axis in [-rank, rank) to [0, rank); false if out of range.
bool normalize_axis(int64_t axis, int64_t rank, int64_t* out);

}  // namespace strider
