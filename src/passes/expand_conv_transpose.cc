// ConvTranspose as a Conv (ops/function_ops.h has its meaning): the input spread out by the
// strides (zeros between the elements), padded by (k - 1) dilation less the pads (cropped
// where that is negative), then convolved with stride 1 by the weights flipped in space and
// with input and output channels swapped within each group. The weight rewrite folds at
// session creation when W is a constant, so what runs is a Reshape/Pad/Slice chain and a
// Conv, on every device's Conv kernel.
#include <fmt/format.h>

#include <limits>

#include "ops/function_ops.h"
#include "passes/body_writer.h"

namespace strider::expansion {
namespace {

// X [N, C, d1..dk] with s - 1 zeros after each element of dim i: [N, C, d1 s1, ..., dk sk]
// (the trailing zeros of each dim are cropped or padded away by the caller).
Result<ValueId> spread(BodyWriter& w, ValueId x, const Shape& shape, const std::vector<int64_t>& strides) {
  const size_t dims = strides.size();
  std::vector<int64_t> axes, pads(2 * (2 + 2 * dims), 0);
  Shape spread_shape{shape[0], shape[1]};
  for (size_t i = 0; i < dims; ++i) {
    axes.push_back(int64_t(3 + 2 * i));
    pads[2 + 2 * dims + 3 + 2 * i] = strides[i] - 1;  // end padding of the new unit axis
    spread_shape.push_back(shape[2 + i] * strides[i]);
  }
  STRIDER_ASSIGN_OR_RETURN(ValueId axes_value, w.ints(axes));
  STRIDER_ASSIGN_OR_RETURN(ValueId unit, w.op("Unsqueeze", {x, axes_value}));
  STRIDER_ASSIGN_OR_RETURN(ValueId pad_sizes, w.ints(pads));
  STRIDER_ASSIGN_OR_RETURN(ValueId padded, w.op("Pad", {unit, pad_sizes}));
  STRIDER_ASSIGN_OR_RETURN(ValueId target, w.ints(spread_shape));
  return w.op("Reshape", {padded, target});
}

// W [C_in, C_out / g, k...] as a Conv's [C_out, C_in / g, k...], flipped in every spatial dim.
Result<ValueId> conv_weights(BodyWriter& w, ValueId weights, const Shape& shape, int64_t group) {
  const size_t rank = shape.size();
  Shape grouped{group, shape[0] / group, shape[1]};
  grouped.insert(grouped.end(), shape.begin() + 2, shape.end());
  std::vector<int64_t> perm{0, 2, 1};
  Shape swapped{shape[1] * group, shape[0] / group};
  std::vector<int64_t> starts, ends, axes, steps;
  for (size_t d = 2; d < rank; ++d) {
    perm.push_back(int64_t(d + 1));
    swapped.push_back(shape[d]);
    starts.push_back(-1);
    ends.push_back(std::numeric_limits<int64_t>::min());
    axes.push_back(int64_t(d));
    steps.push_back(-1);
  }
  STRIDER_ASSIGN_OR_RETURN(ValueId grouped_shape, w.ints(grouped));
  STRIDER_ASSIGN_OR_RETURN(ValueId split, w.op("Reshape", {weights, grouped_shape}));
  STRIDER_ASSIGN_OR_RETURN(ValueId moved, w.op("Transpose", {split}, ints_attr("perm", perm)));
  STRIDER_ASSIGN_OR_RETURN(ValueId swapped_shape, w.ints(swapped));
  STRIDER_ASSIGN_OR_RETURN(ValueId joined, w.op("Reshape", {moved, swapped_shape}));
  STRIDER_ASSIGN_OR_RETURN(ValueId s, w.ints(starts));
  STRIDER_ASSIGN_OR_RETURN(ValueId e, w.ints(ends));
  STRIDER_ASSIGN_OR_RETURN(ValueId a, w.ints(axes));
  STRIDER_ASSIGN_OR_RETURN(ValueId st, w.ints(steps));
  return w.op("Slice", {joined, s, e, a, st});
}

}  // namespace

Status expand_conv_transpose(Graph& g, const Node& node, MemoryBudget* budget) {
  STRIDER_ASSIGN_OR_RETURN(ConvTransposeParams p, resolve_conv_transpose(NodeInputs(g, node)));
  BodyWriter w(g, node, budget);
  w.at_least_opset(13);  // Unsqueeze, Pad and Slice with their operands as inputs
  const Shape x = g.value(node.inputs[0]).shape, wshape = g.value(node.inputs[1]).shape;  // copies: the body adds values
  const size_t dims = p.kernel.size();
  ValueId y = node.inputs[0];
  bool strided = false;
  for (int64_t s : p.strides) strided = strided || s > 1;
  if (strided) {
    STRIDER_ASSIGN_OR_RETURN(y, spread(w, y, x, p.strides));
  }
  // Around the spread input (each dim (d - 1) s + 1 long, plus s - 1 trailing zeros).
  std::vector<int64_t> pads(2 * (2 + dims), 0), starts, ends, axes;
  bool pad = false;
  for (size_t i = 0; i < dims; ++i) {
    const int64_t reach = (p.kernel[i] - 1) * p.dilations[i];
    const int64_t length = x[2 + i] * p.strides[i];
    const int64_t begin = reach - p.pads_begin[i], end = reach - p.pads_end[i] + p.output_padding[i] - (p.strides[i] - 1);
    pads[2 + i] = std::max<int64_t>(begin, 0);
    pads[2 + dims + 2 + i] = std::max<int64_t>(end, 0);
    pad = pad || begin > 0 || end > 0;
    if (begin < 0 || end < 0) {
      starts.push_back(std::max<int64_t>(-begin, 0));
      ends.push_back(length + std::min<int64_t>(end, 0));
      axes.push_back(int64_t(2 + i));
    }
  }
  if (!axes.empty()) {
    STRIDER_ASSIGN_OR_RETURN(ValueId s, w.ints(starts));
    STRIDER_ASSIGN_OR_RETURN(ValueId e, w.ints(ends));
    STRIDER_ASSIGN_OR_RETURN(ValueId a, w.ints(axes));
    STRIDER_ASSIGN_OR_RETURN(y, w.op("Slice", {y, s, e, a}));
  }
  if (pad) {
    STRIDER_ASSIGN_OR_RETURN(ValueId pad_sizes, w.ints(pads));
    STRIDER_ASSIGN_OR_RETURN(y, w.op("Pad", {y, pad_sizes}));
  }
  STRIDER_ASSIGN_OR_RETURN(ValueId weights, conv_weights(w, node.inputs[1], wshape, p.group));
  AttributeMap conv;
  conv.set_int("group", p.group);
  conv.set_ints("dilations", p.dilations);
  conv.set_ints("kernel_shape", p.kernel);
  std::vector<ValueId> inputs{y, weights};
  if (node.input(2) != kNoValue) inputs.push_back(node.inputs[2]);
  return w.op("Conv", inputs, conv, node.outputs[0]).status();
}

// Col2Im (ops/function_ops.h) is a ConvTranspose: the L block places as a grid [N, C K,
// places...], and per group (one per image channel) of K input channels a weight that is
// one-hot at its block position, so each value lands on its pixel and the sums are the
// transposed convolution's. Pads and an output_padding make the output the image's size
// (the places cover the image up to a remainder below the stride). The ConvTranspose is
// expanded in turn (expand_functions repeats until nothing is left to expand).
Status expand_col2im(Graph& g, const Node& node, MemoryBudget* budget) {
  STRIDER_ASSIGN_OR_RETURN(Col2ImParams p, resolve_col2im(NodeInputs(g, node)));
  BodyWriter w(g, node, budget);
  w.at_least_opset(13);
  const DType dtype = g.value(node.inputs[0]).dtype;
  const int64_t block = num_elements(p.block), rows = p.channels * block;
  STRIDER_RETURN_IF_ERROR(w.reserve(rows * block, dtype, "the one-hot weights"));
  Shape weight_shape{rows, 1};
  weight_shape.insert(weight_shape.end(), p.block.begin(), p.block.end());
  std::vector<float> one_hot(size_t(rows * block), 0.0f);
  for (int64_t r = 0; r < rows; ++r) one_hot[size_t(r * block + r % block)] = 1.0f;
  STRIDER_ASSIGN_OR_RETURN(ValueId weights, w.floats(dtype, weight_shape, one_hot));
  Shape grid{g.value(node.inputs[0]).shape[0], rows};
  grid.insert(grid.end(), p.blocks.begin(), p.blocks.end());
  STRIDER_ASSIGN_OR_RETURN(ValueId grid_shape, w.ints(grid));
  STRIDER_ASSIGN_OR_RETURN(ValueId places, w.op("Reshape", {node.inputs[0], grid_shape}));
  const size_t dims = p.image.size();
  std::vector<int64_t> output_padding;
  for (size_t d = 0; d < dims; ++d) {
    const int64_t covered = (p.blocks[d] - 1) * p.strides[d] + (p.block[d] - 1) * p.dilations[d] + 1;
    output_padding.push_back(p.image[d] + p.pads[d] + p.pads[dims + d] - covered);
  }
  AttributeMap attributes = ints_attr("strides", p.strides);
  attributes.set_ints("dilations", p.dilations);
  attributes.set_ints("pads", p.pads);
  attributes.set_ints("output_padding", output_padding);
  attributes.set_int("group", p.channels);
  return w.op("ConvTranspose", {places, weights}, std::move(attributes), node.outputs[0]).status();
}

}  // namespace strider::expansion
