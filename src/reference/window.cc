#include "reference/window.h"

#include <fmt/format.h>

#include "base/shape.h"

namespace strider::ref {
namespace {

int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }
int64_t ceil_div(int64_t a, int64_t b) { return -floor_div(-a, b); }

// An ints attribute of `count` positive (or, for pads, non-negative) entries.
Result<std::vector<int64_t>> window_ints(const AttributeMap& attributes, const char* name,
                                         size_t count, int64_t fallback, int64_t minimum) {
  STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> values,
                           attributes.get_ints(name, std::vector<int64_t>(count, fallback)));
  if (values.empty()) values.assign(count, fallback);
  if (values.size() != count)
    return invalid_model(
        fmt::format("attribute '{}' has {} entries, expected {}", name, values.size(), count));
  for (int64_t v : values)
    if (v < minimum)
      return invalid_model(fmt::format("attribute '{}' {} has an entry below {}", name,
                                       shape_to_string(values), minimum));
  return values;
}

Result<Shape> kernel_of(const AttributeMap& attributes, const Shape& input,
                        const WindowOptions& options) {
  if (!attributes.has("kernel_shape")) {
    if (!options.kernel_from_weights) return invalid_model("missing attribute 'kernel_shape'");
    return *options.kernel_from_weights;
  }
  STRIDER_ASSIGN_OR_RETURN(Shape kernel,
                           window_ints(attributes, "kernel_shape", input.size(), 1, 1));
  if (options.kernel_from_weights && kernel != *options.kernel_from_weights)
    return invalid_model(fmt::format("attribute 'kernel_shape' {} differs from the weights' {}",
                                     shape_to_string(kernel),
                                     shape_to_string(*options.kernel_from_weights)));
  return kernel;
}

}  // namespace

Result<WindowGeometry> window_geometry(const AttributeMap& attributes, const Shape& input,
                                       const WindowOptions& options) {
  size_t n = input.size();
  WindowGeometry g;
  g.input = input;
  STRIDER_ASSIGN_OR_RETURN(g.kernel, kernel_of(attributes, input, options));
  STRIDER_ASSIGN_OR_RETURN(g.strides, window_ints(attributes, "strides", n, 1, 1));
  g.dilations.assign(n, 1);
  if (options.dilations_allowed) {
    STRIDER_ASSIGN_OR_RETURN(g.dilations, window_ints(attributes, "dilations", n, 1, 1));
  }
  STRIDER_ASSIGN_OR_RETURN(std::string auto_pad, attributes.get_string("auto_pad", "NOTSET"));
  g.pad_begin.assign(n, 0);
  g.pad_end.assign(n, 0);
  g.output.assign(n, 0);
  bool same = auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
  if (auto_pad == "NOTSET") {
    STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> pads,
                             window_ints(attributes, "pads", 2 * n, 0, 0));
    for (size_t i = 0; i < n; ++i) {
      g.pad_begin[i] = pads[i];
      g.pad_end[i] = pads[n + i];
    }
  } else if (!same && auto_pad != "VALID") {
    return invalid_model(fmt::format("attribute 'auto_pad' is '{}'", auto_pad));
  }
  for (size_t i = 0; i < n; ++i) {
    int64_t extent = (g.kernel[i] - 1) * g.dilations[i] + 1;
    if (same) {
      g.output[i] = ceil_div(input[i], g.strides[i]);
      int64_t total = std::max<int64_t>(0, (g.output[i] - 1) * g.strides[i] + extent - input[i]);
      g.pad_begin[i] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      g.pad_end[i] = total - g.pad_begin[i];
    } else {
      int64_t span = input[i] + g.pad_begin[i] + g.pad_end[i] - extent;
      g.output[i] = (options.ceil_mode && auto_pad == "NOTSET" ? ceil_div(span, g.strides[i])
                                                               : floor_div(span, g.strides[i])) +
                    1;
      if (options.ceil_mode && options.drop_windows_starting_in_right_padding &&
          (g.output[i] - 1) * g.strides[i] >= input[i] + g.pad_begin[i])
        --g.output[i];
    }
    if (g.output[i] < 1)
      return invalid_argument(fmt::format(
          "spatial input {} with kernel {}, strides {}, dilations {} and pads {}+{} gives no "
          "output",
          shape_to_string(input), shape_to_string(g.kernel), shape_to_string(g.strides),
          shape_to_string(g.dilations), shape_to_string(g.pad_begin), shape_to_string(g.pad_end)));
  }
  return g;
}

}  // namespace strider::ref
