#include "ops/view_ops.h"

#include <fmt/format.h>

#include "ops/shape_ops.h"

namespace strider {

Result<std::optional<TensorView>> output_view(const NodeInputs& node, size_t output, const TensorView& input) {
  const Node& n = node.node();
  if (output >= n.outputs.size() || n.outputs[output] == kNoValue)
    return internal_error(fmt::format("node '{}' has no output {}", n.name, output));
  const Shape& shape = node.graph().value(n.outputs[output]).shape;
  const OpSchema* schema = find_op_schema(n.domain, n.op_type);
  switch (schema ? schema->traits.view : ViewKind::kNone) {
    case ViewKind::kSameElements: return reshape_view(input, shape);
    case ViewKind::kTranspose: {
      STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> perm, resolve_transpose(node));
      STRIDER_ASSIGN_OR_RETURN(TensorView view, permute_view(input, perm));
      return std::optional(view);
    }
    case ViewKind::kSlice: {
      STRIDER_ASSIGN_OR_RETURN(std::vector<SliceAxis> axes, resolve_slice(node));
      TensorView view = input;
      for (const SliceAxis& a : axes) {
        STRIDER_ASSIGN_OR_RETURN(view, slice_count_view(view, a.axis, a.start, a.step, a.count));
      }
      return std::optional(view);
    }
    case ViewKind::kSplit: {
      STRIDER_ASSIGN_OR_RETURN(SplitParams p, resolve_split(node));
      if (output >= p.sizes.size()) return internal_error(fmt::format("node '{}': split output {}", n.name, output));
      int64_t offset = 0;
      for (size_t i = 0; i < output; ++i) offset += p.sizes[i];
      STRIDER_ASSIGN_OR_RETURN(TensorView view, slice_view(input, p.axis, offset, offset + p.sizes[output], 1));
      return std::optional(view);
    }
    case ViewKind::kExpand: {
      STRIDER_ASSIGN_OR_RETURN(TensorView view, broadcast_view(input, shape));
      return std::optional(view);
    }
    case ViewKind::kGather: {
      STRIDER_ASSIGN_OR_RETURN(int64_t axis, n.attributes.get_int("axis", 0));
      if (axis < 0) axis += input.rank();
      const Tensor* indices = node.input_constant(1);
      if (indices == nullptr || indices->num_elements() != 1 || axis < 0 || axis >= input.rank())
        return internal_error(fmt::format("node '{}': Gather is a view only of one constant index", n.name));
      int64_t index = indices->element_as_int(0);
      if (index < 0) index += input.sizes[size_t(axis)];
      STRIDER_ASSIGN_OR_RETURN(TensorView one, slice_view(input, axis, index, index + 1, 1));
      return reshape_view(one, shape);
    }
    case ViewKind::kNone: break;
  }
  return internal_error(fmt::format("node '{}' ({}) makes no view", n.name, n.op_type));
}

Result<TensorView> concat_part_view(const NodeInputs& node, size_t input, const TensorView& output) {
  STRIDER_ASSIGN_OR_RETURN(int64_t axis, node.attributes().require_int("axis"));
  if (axis < 0) axis += output.rank();
  if (axis < 0 || axis >= output.rank() || input >= node.num_inputs())
    return internal_error(fmt::format("node '{}': concat part {} on axis {}", node.node().name, input, axis));
  int64_t offset = 0;
  for (size_t i = 0; i < input; ++i) offset += node.input_shape(i)[size_t(axis)];
  int64_t size = node.input_shape(input)[size_t(axis)];
  return slice_view(output, axis, offset, offset + size, 1);
}

}  // namespace strider
