#include "hal/resize_views.h"

#include <fmt/format.h>

#include "ops/op_registry.h"

namespace strider {

Status check_resize_views(const KernelRequest& r, const ResizeParams& p) {
  if (!r.has_input(0) || r.outputs.empty() || r.outputs[0].allocation == nullptr)
    return invalid_argument("Resize needs views of its data input and its output");
  const TensorView& x = r.inputs[0];
  const TensorView& y = r.outputs[0];
  if (x.dtype != y.dtype)
    return invalid_argument(fmt::format("input is {} but output is {}", dtype_name(x.dtype), dtype_name(y.dtype)));
  const Shape& declared = NodeInputs(r.graph, r.node).input_shape(0);
  if (x.sizes != declared)
    return invalid_argument(fmt::format("input view {} does not match the input shape {}", shape_to_string(x.sizes),
                                        shape_to_string(declared)));
  if (y.sizes != p.output)
    return invalid_argument(fmt::format("output view {} does not match the resized shape {}", shape_to_string(y.sizes),
                                        shape_to_string(p.output)));
  if (y.rank() == 0) return invalid_argument("Resize of a scalar");
  for (size_t d = 0; d < size_t(x.rank()); ++d)
    if (x.sizes[d] == 0 && y.sizes[d] != 0)
      return invalid_argument(fmt::format("dim {} is empty in the input but {} in the output", d, y.sizes[d]));
  return Status::ok();
}

}  // namespace strider
