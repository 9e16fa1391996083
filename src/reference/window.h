// Sliding-window geometry shared by the reference Conv and pooling ops: kernel, strides,
// dilations, explicit or automatic padding, and the output size, per spatial axis.
#pragma once

#include <optional>
#include <vector>

#include "ir/attributes.h"
#include "reference/op_support.h"

namespace strider::ref {

struct WindowGeometry {
  Shape input;   // spatial input dims
  Shape kernel;  // spatial kernel dims
  std::vector<int64_t> strides, dilations, pad_begin, pad_end;
  Shape output;  // spatial output dims

  // Input coordinate on `axis` read by output index `o` and kernel tap `k`; may lie in the
  // padding (< 0 or >= input[axis]).
  int64_t input_coordinate(size_t axis, int64_t o, int64_t k) const {
    return o * strides[axis] - pad_begin[axis] + k * dilations[axis];
  }
};

struct WindowOptions {
  // The kernel taken from the weights (Conv); pools read the required kernel_shape.
  std::optional<Shape> kernel_from_weights;
  bool ceil_mode = false;
  // Pools: with ceil_mode, a last window that would start in the right padding is dropped.
  // The spec states it from opset 22 as a note (22 changed only types); earlier opsets are
  // read the same way, as PyTorch, which exports ceil_mode pools, computes them.
  bool drop_windows_starting_in_right_padding = false;
  // Pools before the opset that added `dilations` ignore it (always 1).
  bool dilations_allowed = true;
};

// Reads kernel_shape, strides, dilations, pads and auto_pad (NOTSET, SAME_UPPER,
// SAME_LOWER, VALID) from `attributes` for the spatial dims `input`, and computes the
// output size; an error names the attribute at fault or the empty output.
Result<WindowGeometry> window_geometry(const AttributeMap& attributes, const Shape& input,
                                       const WindowOptions& options);

}  // namespace strider::ref
