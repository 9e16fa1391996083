// DepthToSpace, SpaceToDepth, CenterCropPad and ReverseSequence as primitive ops
// (ops/function_ops.h has their meaning). The first two are a reshape, a transpose and a
// reshape: views where the planner can make them so, one copy where it cannot.
#include <fmt/format.h>

#include "base/onnx_types.h"
#include "ops/function_ops.h"
#include "passes/body_writer.h"

namespace strider::expansion {

// DCR: [N, C, H, W] as [N, b, b, C', H, W] -> [N, C', H, b, W, b]; CRD: as [N, C', b, b, H, W].
Status expand_depth_to_space(Graph& g, const Node& node, MemoryBudget* budget) {
  STRIDER_ASSIGN_OR_RETURN(BlockParams p, resolve_depth_to_space(NodeInputs(g, node)));
  BodyWriter w(g, node, budget);
  const Shape x = g.value(node.inputs[0]).shape;  // a copy: the body adds values
  const int64_t b = p.block, c = p.out[1];
  STRIDER_ASSIGN_OR_RETURN(ValueId split_shape, p.crd ? w.ints({x[0], c, b, b, x[2], x[3]}) : w.ints({x[0], b, b, c, x[2], x[3]}));
  STRIDER_ASSIGN_OR_RETURN(ValueId split, w.op("Reshape", {node.inputs[0], split_shape}));
  const std::vector<int64_t> perm = p.crd ? std::vector<int64_t>{0, 1, 4, 2, 5, 3} : std::vector<int64_t>{0, 3, 4, 1, 5, 2};
  STRIDER_ASSIGN_OR_RETURN(ValueId moved, w.op("Transpose", {split}, ints_attr("perm", perm)));
  STRIDER_ASSIGN_OR_RETURN(ValueId out_shape, w.ints(p.out));
  return w.op("Reshape", {moved, out_shape}, {}, node.outputs[0]).status();
}

// [N, C, H, W] as [N, C, H', b, W', b] -> [N, b, b, C, H', W'].
Status expand_space_to_depth(Graph& g, const Node& node, MemoryBudget* budget) {
  STRIDER_ASSIGN_OR_RETURN(BlockParams p, resolve_space_to_depth(NodeInputs(g, node)));
  BodyWriter w(g, node, budget);
  const Shape x = g.value(node.inputs[0]).shape;  // a copy: the body adds values
  const int64_t b = p.block;
  STRIDER_ASSIGN_OR_RETURN(ValueId split_shape, w.ints({x[0], x[1], x[2] / b, b, x[3] / b, b}));
  STRIDER_ASSIGN_OR_RETURN(ValueId split, w.op("Reshape", {node.inputs[0], split_shape}));
  STRIDER_ASSIGN_OR_RETURN(ValueId moved, w.op("Transpose", {split}, ints_attr("perm", {0, 3, 5, 1, 2, 4})));
  STRIDER_ASSIGN_OR_RETURN(ValueId out_shape, w.ints(p.out));
  return w.op("Reshape", {moved, out_shape}, {}, node.outputs[0]).status();
}

// A Slice of the axes that shrink, then a Pad (zeros) of those that grow.
// MaxUnpool (ops/function_ops.h): a zero tensor the size of the output, flat, with X's
// values scattered to I's positions (ScatterElements checks each index), reshaped.
Status expand_max_unpool(Graph& g, const Node& node, MemoryBudget* budget) {
  STRIDER_ASSIGN_OR_RETURN(MaxUnpoolParams p, resolve_max_unpool(NodeInputs(g, node)));
  BodyWriter w(g, node, budget);
  w.at_least_opset(13);
  const DType dtype = g.value(node.inputs[0]).dtype;
  const int64_t total = num_elements(p.unpooled);
  STRIDER_RETURN_IF_ERROR(w.reserve(total, dtype, "the unpooled output"));
  STRIDER_ASSIGN_OR_RETURN(ValueId flat_shape, w.ints({-1}));
  STRIDER_ASSIGN_OR_RETURN(ValueId size, w.ints({total}));
  AttributeMap zero;
  zero.set_tensor("value", Tensor(dtype, {1}));
  STRIDER_ASSIGN_OR_RETURN(ValueId zeros, w.op("ConstantOfShape", {size}, std::move(zero)));
  STRIDER_ASSIGN_OR_RETURN(ValueId values, w.op("Reshape", {node.inputs[0], flat_shape}));
  STRIDER_ASSIGN_OR_RETURN(ValueId indices, w.op("Reshape", {node.inputs[1], flat_shape}));
  STRIDER_ASSIGN_OR_RETURN(ValueId scattered, w.op("ScatterElements", {zeros, indices, values}, int_attr("axis", 0)));
  STRIDER_ASSIGN_OR_RETURN(ValueId unpooled_shape, w.ints(p.unpooled));
  if (p.out == p.unpooled) return w.op("Reshape", {scattered, unpooled_shape}, {}, node.outputs[0]).status();
  STRIDER_ASSIGN_OR_RETURN(ValueId unpooled, w.op("Reshape", {scattered, unpooled_shape}));
  std::vector<int64_t> pads(2 * p.out.size(), 0);
  for (size_t d = 0; d < p.out.size(); ++d) pads[p.out.size() + d] = p.out[d] - p.unpooled[d];
  STRIDER_ASSIGN_OR_RETURN(ValueId pad_sizes, w.ints(pads));
  return w.op("Pad", {unpooled, pad_sizes}, {}, node.outputs[0]).status();
}

Status expand_center_crop_pad(Graph& g, const Node& node, MemoryBudget* budget) {
  STRIDER_ASSIGN_OR_RETURN(CenterCropPadParams p, resolve_center_crop_pad(NodeInputs(g, node)));
  BodyWriter w(g, node, budget);
  const Shape x = g.value(node.inputs[0]).shape;  // a copy: the body adds values
  std::vector<int64_t> starts, ends, axes, pads(2 * x.size(), 0);
  bool pad = false;
  for (size_t i = 0; i < p.axes.size(); ++i) {
    const int64_t axis = p.axes[i], have = x[size_t(axis)], want = p.sizes[i];
    if (have > want) {
      starts.push_back((have - want) / 2);
      ends.push_back((have - want) / 2 + want);
      axes.push_back(axis);
    } else if (have < want) {
      pads[size_t(axis)] = (want - have) / 2;
      pads[x.size() + size_t(axis)] = want - have - (want - have) / 2;
      pad = true;
    }
  }
  ValueId y = node.inputs[0];
  if (!axes.empty()) {
    STRIDER_ASSIGN_OR_RETURN(ValueId s, w.ints(starts));
    STRIDER_ASSIGN_OR_RETURN(ValueId e, w.ints(ends));
    STRIDER_ASSIGN_OR_RETURN(ValueId a, w.ints(axes));
    STRIDER_ASSIGN_OR_RETURN(y, w.op("Slice", {y, s, e, a}));
  }
  if (!pad) return w.op("Identity", {y}, {}, node.outputs[0]).status();
  STRIDER_ASSIGN_OR_RETURN(ValueId pad_sizes, w.ints(pads));
  return w.op("Pad", {y, pad_sizes}, {}, node.outputs[0]).status();
}

// GatherElements along time with index t' = len[b] - 1 - t where t < len[b], else t. A
// length outside [0, T] is the model's error: the gather refuses the index it makes.
Status expand_reverse_sequence(Graph& g, const Node& node, MemoryBudget* budget) {
  STRIDER_ASSIGN_OR_RETURN(ReverseSequenceParams p, resolve_reverse_sequence(NodeInputs(g, node)));
  BodyWriter w(g, node, budget);
  w.at_least_opset(11);  // GatherElements
  const Shape x = g.value(node.inputs[0]).shape;  // a copy: the body adds values
  const int64_t steps = x[size_t(p.time_axis)];
  STRIDER_RETURN_IF_ERROR(w.reserve(steps, DType::kI64, "the time steps"));
  Shape time_shape(x.size(), 1), batch_shape(x.size(), 1);
  time_shape[size_t(p.time_axis)] = steps;
  batch_shape[size_t(p.batch_axis)] = x[size_t(p.batch_axis)];
  std::vector<int64_t> times(static_cast<size_t>(steps));
  for (int64_t t = 0; t < steps; ++t) times[size_t(t)] = t;
  STRIDER_ASSIGN_OR_RETURN(ValueId t, w.constant(Tensor::from_values<int64_t>(DType::kI64, time_shape, times)));
  STRIDER_ASSIGN_OR_RETURN(ValueId lens, w.op("Cast", {node.inputs[1]}, int_attr("to", onnx_type_code(DType::kI64))));
  STRIDER_ASSIGN_OR_RETURN(ValueId lens_shape, w.ints(batch_shape));
  STRIDER_ASSIGN_OR_RETURN(lens, w.op("Reshape", {lens, lens_shape}));
  STRIDER_ASSIGN_OR_RETURN(ValueId one, w.ints({1}));
  STRIDER_ASSIGN_OR_RETURN(ValueId last, w.op("Sub", {lens, one}));
  STRIDER_ASSIGN_OR_RETURN(ValueId reversed, w.op("Sub", {last, t}));
  STRIDER_ASSIGN_OR_RETURN(ValueId inside, w.op("Less", {t, lens}));
  STRIDER_ASSIGN_OR_RETURN(ValueId index, w.op("Where", {inside, reversed, t}));
  STRIDER_ASSIGN_OR_RETURN(ValueId full, w.ints(x));
  STRIDER_ASSIGN_OR_RETURN(index, w.op("Expand", {index, full}));
  return w.op("GatherElements", {node.inputs[0], index}, int_attr("axis", p.time_axis), node.outputs[0]).status();
}

}  // namespace strider::expansion
