// Resolution: turns the planner's decisions into views on virtual allocations, one per
// buffer, using the same TensorView algebra (and bounds checks) the kernels rely on.
#include <fmt/format.h>

#include <algorithm>

#include "ops/op_registry.h"
#include "ops/shape_ops.h"
#include "ops/view_ops.h"
#include "plan/planner_state.h"

namespace strider::plan_internal {
namespace {

StorageKind storage_kind(const PlannerState& s, ValueId v) {
  if (s.graph.value(v).is_constant()) return StorageKind::kConstant;
  if (s.is_graph_input[size_t(v)]) return StorageKind::kInput;
  if (s.is_graph_output[size_t(v)]) return StorageKind::kOutput;
  return StorageKind::kArena;
}

// A new buffer holding `v` alone, packed in the layout's order.
Status make_root(PlannerState& s, ValueId v) {
  const Value& value = s.graph.value(v);
  StorageKind kind = storage_kind(s, v);
  int64_t size = num_elements(value.shape) * dtype_size(value.dtype);
  int index = int(s.buffers.size());
  s.virtual_allocations.push_back(std::make_unique<Allocation>(
      uint64_t(index), fmt::format("buffer#{}", index), kPlannedDevice, nullptr, size, kBufferAlignment,
      StorageMode::kDevice, false));
  // Weights stay in their ONNX (row-major) order; activations take the layout.
  Strides strides = kind == StorageKind::kConstant ? contiguous_strides(value.shape) : layout_strides(s, v);
  STRIDER_ASSIGN_OR_RETURN(TensorView view, make_view(*s.virtual_allocations.back(), 0, value.dtype, value.shape,
                                                      std::move(strides), fmt::format("value '{}'", value.name)));
  PlanBuffer buffer;
  buffer.kind = kind;
  buffer.root = v;
  buffer.size = size;
  s.buffers.push_back(buffer);
  s.buffer_of[size_t(v)] = index;
  s.virtual_views[size_t(v)] = std::move(view);
  return Status::ok();
}

size_t output_index(const Node& node, ValueId v) {
  return size_t(std::find(node.outputs.begin(), node.outputs.end(), v) - node.outputs.begin());
}

// The view the producer of `v` makes of `source` (ops/view_ops.h, which the copy kernels
// use too), or nullopt when none exists (a Reshape of strides that do not merge).
Result<std::optional<TensorView>> view_for(const PlannerState& s, ValueId v, const TensorView& source) {
  const Node& node = s.graph.node(s.graph.value(v).producer);
  return output_view(NodeInputs(s.graph, node), output_index(node, v), source);
}

Status resolve(PlannerState& s, ValueId v);

Status resolve_alias(PlannerState& s, ValueId v) {
  Decision& d = s.decisions[size_t(v)];
  STRIDER_RETURN_IF_ERROR(resolve(s, d.alias_of));
  const TensorView& source = *s.virtual_views[size_t(d.alias_of)];
  const Value& value = s.graph.value(v);
  std::optional<TensorView> view;
  if (d.role == ValueRole::kView) {
    STRIDER_ASSIGN_OR_RETURN(view, view_for(s, v, source));
    if (!view) {  // no view exists: the node copies, into bytes of its own
      d = Decision{};
      d.materialized = true;
      return make_root(s, v);
    }
  } else if (d.role == ValueRole::kPlacedThrough) {
    // The Reshape's bytes seen as the Transpose's output, then un-transposed: the product's
    // strided view, which the Transpose and the Reshape then see again as views.
    const Node& transpose = s.graph.node(s.graph.value(d.through).producer);
    STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> perm, resolve_transpose(NodeInputs(s.graph, transpose)));
    std::vector<int64_t> inverse(perm.size());
    for (size_t i = 0; i < perm.size(); ++i) inverse[size_t(perm[i])] = int64_t(i);
    std::optional<TensorView> transposed = reshape_view(source, s.graph.value(d.through).shape);
    if (!transposed) {  // the Reshape's bytes cannot be seen that way: the product keeps its own
      d = Decision{};
      return make_root(s, v);
    }
    STRIDER_ASSIGN_OR_RETURN(TensorView placed, permute_view(*transposed, inverse));
    view = std::move(placed);
  } else if (d.role == ValueRole::kConcatPart) {
    int64_t size = value.shape[size_t(d.concat_axis)];
    STRIDER_ASSIGN_OR_RETURN(view, slice_view(source, d.concat_axis, d.concat_offset, d.concat_offset + size, 1));
  } else {  // in place: the same bytes in the same arrangement
    view = source;
  }
  s.virtual_views[size_t(v)] = std::move(view);
  s.buffer_of[size_t(v)] = s.buffer_of[size_t(d.alias_of)];
  return Status::ok();
}

Status resolve(PlannerState& s, ValueId v) {
  if (s.virtual_views[size_t(v)]) return Status::ok();
  if (s.decisions[size_t(v)].role == ValueRole::kOwn) return make_root(s, v);
  return resolve_alias(s, v);
}

}  // namespace

Strides layout_strides(const PlannerState& s, ValueId v) {
  const Shape& sizes = s.graph.value(v).shape;
  if (!s.channels_last[size_t(v)] || sizes.size() < 3 || sizes.size() > 5) return contiguous_strides(sizes);
  // Channels-last: dim 1 innermost, then the spatial dims from the last, then the batch.
  Strides strides(sizes.size());
  int64_t running = 1;
  strides[1] = running;
  running *= std::max<int64_t>(sizes[1], 1);
  for (size_t d = sizes.size(); d-- > 2;) {
    strides[d] = running;
    running *= std::max<int64_t>(sizes[d], 1);
  }
  strides[0] = running;
  return strides;
}

Status resolve_values(PlannerState& s) {
  size_t n = size_t(s.graph.num_values());
  s.virtual_views.assign(n, std::nullopt);
  s.buffer_of.assign(n, -1);
  s.buffers.clear();
  s.virtual_allocations.clear();
  for (ValueId v = 0; v < ValueId(n); ++v)
    if (s.used[size_t(v)]) STRIDER_RETURN_IF_ERROR(resolve(s, v));
  return Status::ok();
}

}  // namespace strider::plan_internal
