// Hardmax, LRN, LpPool, EyeLike and the window functions as primitive ops (ops/function_ops.h
// has their meaning). EyeLike and the windows are constants once shapes are known: their
// bodies are a constant and a Cast, which constant folding then evaluates.
#include <fmt/format.h>

#include <cmath>
#include <numbers>

#include "base/onnx_types.h"
#include "ops/function_ops.h"
#include "passes/body_writer.h"

namespace strider::expansion {
namespace {

// 1 where ArgMax along `axis` (the first maximum) is the position, else 0.
Result<ValueId> hardmax_along(BodyWriter& w, ValueId x, const Shape& shape, int64_t axis, DType t) {
  AttributeMap arg = int_attr("axis", axis);
  arg.set_int("keepdims", 1);
  STRIDER_ASSIGN_OR_RETURN(ValueId best, w.op("ArgMax", {x}, arg));
  const int64_t n = shape[size_t(axis)];
  STRIDER_RETURN_IF_ERROR(w.reserve(n, DType::kI64, "the positions"));
  Shape along(shape.size(), 1);
  along[size_t(axis)] = n;
  std::vector<int64_t> positions(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) positions[size_t(i)] = i;
  STRIDER_ASSIGN_OR_RETURN(ValueId at, w.constant(Tensor::from_values<int64_t>(DType::kI64, along, positions)));
  STRIDER_ASSIGN_OR_RETURN(ValueId hit, w.op("Equal", {best, at}));
  return w.op("Cast", {hit}, int_attr("to", onnx_type_code(t)));
}

}  // namespace

Status expand_hardmax(Graph& g, const Node& node, MemoryBudget* budget) {
  STRIDER_ASSIGN_OR_RETURN(HardmaxParams p, resolve_hardmax(NodeInputs(g, node)));
  BodyWriter w(g, node, budget);
  const Shape x = g.value(node.inputs[0]).shape;  // a copy: the body adds values
  const DType t = g.value(node.inputs[0]).dtype;
  if (!p.coerce) {
    STRIDER_ASSIGN_OR_RETURN(ValueId y, hardmax_along(w, node.inputs[0], x, p.axis, t));
    return w.op("Identity", {y}, {}, node.outputs[0]).status();
  }
  int64_t rows = 1, columns = 1;
  for (size_t d = 0; d < x.size(); ++d) (int64_t(d) < p.axis ? rows : columns) *= x[d];
  STRIDER_ASSIGN_OR_RETURN(ValueId flat_shape, w.ints({rows, columns}));
  STRIDER_ASSIGN_OR_RETURN(ValueId flat, w.op("Reshape", {node.inputs[0], flat_shape}));
  STRIDER_ASSIGN_OR_RETURN(ValueId y, hardmax_along(w, flat, Shape{rows, columns}, 1, t));
  STRIDER_ASSIGN_OR_RETURN(ValueId shape, w.ints(x));
  return w.op("Reshape", {y, shape}, {}, node.outputs[0]).status();
}

// x^2 seen as [N, 1, C, d..] and averaged over `size` channels (count_include_pad: the
// window's sum / size), so alpha / size * sum is alpha * that mean.
Status expand_lrn(Graph& g, const Node& node, MemoryBudget* budget) {
  STRIDER_ASSIGN_OR_RETURN(LrnParams p, resolve_lrn(NodeInputs(g, node)));
  BodyWriter w(g, node, budget);
  const Shape x = g.value(node.inputs[0]).shape;  // a copy: the body adds values
  const DType t = g.value(node.inputs[0]).dtype;
  STRIDER_ASSIGN_OR_RETURN(ValueId squares, w.op("Mul", {node.inputs[0], node.inputs[0]}));
  Shape wide = x;
  wide.insert(wide.begin() + 1, 1);
  STRIDER_ASSIGN_OR_RETURN(ValueId wide_shape, w.ints(wide));
  STRIDER_ASSIGN_OR_RETURN(ValueId planes, w.op("Reshape", {squares, wide_shape}));
  const size_t spatial = x.size() - 1;  // C and the dims after it
  std::vector<int64_t> kernel(spatial, 1), pads(2 * spatial, 0);
  kernel[0] = p.size;
  pads[0] = (p.size - 1) / 2;
  pads[spatial] = p.size - 1 - (p.size - 1) / 2;
  AttributeMap pool = ints_attr("kernel_shape", kernel);
  pool.set_ints("pads", pads);
  pool.set_int("count_include_pad", 1);
  STRIDER_ASSIGN_OR_RETURN(ValueId mean, w.op("AveragePool", {planes}, pool));
  STRIDER_ASSIGN_OR_RETURN(ValueId shape, w.ints(x));
  STRIDER_ASSIGN_OR_RETURN(mean, w.op("Reshape", {mean, shape}));
  STRIDER_ASSIGN_OR_RETURN(ValueId alpha, w.floats(t, {}, {p.alpha}));
  STRIDER_ASSIGN_OR_RETURN(ValueId bias, w.floats(t, {}, {p.bias}));
  STRIDER_ASSIGN_OR_RETURN(ValueId beta, w.floats(t, {}, {p.beta}));
  STRIDER_ASSIGN_OR_RETURN(ValueId scaled, w.op("Mul", {mean, alpha}));
  STRIDER_ASSIGN_OR_RETURN(ValueId base, w.op("Add", {scaled, bias}));
  STRIDER_ASSIGN_OR_RETURN(ValueId denominator, w.op("Pow", {base, beta}));
  return w.op("Div", {node.inputs[0], denominator}, {}, node.outputs[0]).status();
}

// (AveragePool of |x|^p with padding counted, times the window's taps)^(1/p).
Status expand_lp_pool(Graph& g, const Node& node, MemoryBudget* budget) {
  STRIDER_ASSIGN_OR_RETURN(LpPoolParams p, resolve_lp_pool(NodeInputs(g, node)));
  BodyWriter w(g, node, budget);
  const DType t = g.value(node.inputs[0]).dtype;
  STRIDER_ASSIGN_OR_RETURN(ValueId magnitude, w.op("Abs", {node.inputs[0]}));
  ValueId powered = magnitude;
  if (p.p == 2) {
    STRIDER_ASSIGN_OR_RETURN(powered, w.op("Mul", {magnitude, magnitude}));
  } else if (p.p != 1) {
    STRIDER_ASSIGN_OR_RETURN(ValueId exponent, w.floats(t, {}, {float(p.p)}));
    STRIDER_ASSIGN_OR_RETURN(powered, w.op("Pow", {magnitude, exponent}));
  }
  AttributeMap pool;  // the window's attributes, without p
  for (const auto& [name, value] : node.attributes.all())
    if (name != "p") pool.set(name, value);
  pool.set_int("count_include_pad", 1);
  STRIDER_ASSIGN_OR_RETURN(ValueId mean, w.op("AveragePool", {powered}, pool));
  STRIDER_ASSIGN_OR_RETURN(ValueId taps, w.floats(t, {}, {float(p.window_volume)}));
  STRIDER_ASSIGN_OR_RETURN(ValueId sum, w.op("Mul", {mean, taps}));
  if (p.p == 1) return w.op("Identity", {sum}, {}, node.outputs[0]).status();
  if (p.p == 2) return w.op("Sqrt", {sum}, {}, node.outputs[0]).status();
  STRIDER_ASSIGN_OR_RETURN(ValueId root, w.floats(t, {}, {float(1.0 / double(p.p))}));
  return w.op("Pow", {sum, root}, {}, node.outputs[0]).status();
}

Status expand_eye_like(Graph& g, const Node& node, MemoryBudget* budget) {
  STRIDER_ASSIGN_OR_RETURN(EyeLikeParams p, resolve_eye_like(NodeInputs(g, node)));
  BodyWriter w(g, node, budget);
  const Shape x = g.value(node.inputs[0]).shape;  // a copy: the body adds values
  STRIDER_RETURN_IF_ERROR(w.reserve(x[0] * x[1], DType::kI64, "the identity"));
  std::vector<int64_t> eye(size_t(x[0] * x[1]), 0);
  for (int64_t r = 0; r < x[0]; ++r)
    if (r + p.k >= 0 && r + p.k < x[1]) eye[size_t(r * x[1] + r + p.k)] = 1;
  STRIDER_ASSIGN_OR_RETURN(ValueId ones, w.constant(Tensor::from_values<int64_t>(DType::kI64, x, eye)));
  return w.op("Cast", {ones}, int_attr("to", onnx_type_code(p.dtype)), node.outputs[0]).status();
}

Status expand_window_function(Graph& g, const Node& node, MemoryBudget* budget) {
  STRIDER_ASSIGN_OR_RETURN(WindowParams p, resolve_window_function(NodeInputs(g, node)));
  BodyWriter w(g, node, budget);
  STRIDER_RETURN_IF_ERROR(w.reserve(p.size, DType::kF64, "the window"));
  const double span = double(p.periodic ? p.size : p.size - 1);
  std::vector<double> values(static_cast<size_t>(p.size));
  for (int64_t n = 0; n < p.size; ++n) {
    const double turn = 2.0 * std::numbers::pi * double(n) / span;
    values[size_t(n)] = p.a0 - p.a1 * std::cos(turn) + p.a2 * std::cos(2.0 * turn);
  }
  STRIDER_ASSIGN_OR_RETURN(ValueId window, w.constant(Tensor::from_values<double>(DType::kF64, {p.size}, values)));
  return w.op("Cast", {window}, int_attr("to", onnx_type_code(p.dtype)), node.outputs[0]).status();
}

}  // namespace strider::expansion
