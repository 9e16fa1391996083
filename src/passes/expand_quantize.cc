// QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear and QLinearMatMul as float ops
// (ops/quantize.h has their meaning and says why strider dequantizes): Cast, Sub, Mul to
// dequantize; Div, Round (half to even, as ONNX's), Add, Clip to the integer range and Cast
// to quantize. A blocked scale is repeated along its axis with Unsqueeze, Expand and Reshape.
#include <fmt/format.h>

#include "base/onnx_types.h"
#include "ops/quantize.h"
#include "passes/body_writer.h"

namespace strider::expansion {
namespace {

Result<ValueId> cast(BodyWriter& w, ValueId v, DType from, DType to) {
  if (from == to) return v;
  return w.op("Cast", {v}, int_attr("to", onnx_type_code(to)));
}

// A scale or zero point (shaped `param`) made to broadcast against x (shaped `x`).
Result<ValueId> spread(BodyWriter& w, ValueId v, const Shape& param, const Shape& x, const QuantizeParams& p) {
  if (p.granularity == QuantGranularity::kTensor) return v;
  const size_t axis = size_t(p.axis);
  if (p.granularity == QuantGranularity::kAxis) {
    Shape along(x.size(), 1);
    along[axis] = x[axis];
    STRIDER_ASSIGN_OR_RETURN(ValueId shape, w.ints(along));
    return w.op("Reshape", {v, shape});
  }
  STRIDER_ASSIGN_OR_RETURN(ValueId at, w.ints({p.axis + 1}));
  STRIDER_ASSIGN_OR_RETURN(ValueId wide, w.op("Unsqueeze", {v, at}));
  Shape repeated = param;
  repeated.insert(repeated.begin() + long(axis) + 1, p.block);
  STRIDER_ASSIGN_OR_RETURN(ValueId repeated_shape, w.ints(repeated));
  STRIDER_ASSIGN_OR_RETURN(wide, w.op("Expand", {wide, repeated_shape}));
  Shape merged = param;
  merged[axis] *= p.block;
  STRIDER_ASSIGN_OR_RETURN(ValueId merged_shape, w.ints(merged));
  STRIDER_ASSIGN_OR_RETURN(ValueId full, w.op("Reshape", {wide, merged_shape}));
  if (merged[axis] == x[axis]) return full;
  STRIDER_ASSIGN_OR_RETURN(ValueId starts, w.ints({0}));
  STRIDER_ASSIGN_OR_RETURN(ValueId ends, w.ints({x[axis]}));
  STRIDER_ASSIGN_OR_RETURN(ValueId axes, w.ints({p.axis}));
  return w.op("Slice", {full, starts, ends, axes});
}

struct QuantOperands {
  ValueId x, scale, zero_point;  // zero_point may be kNoValue
  Shape x_shape, scale_shape;
  DType scale_dtype;
};

QuantOperands operands_of(const Graph& g, const Node& node, size_t x, size_t scale, size_t zero_point) {
  const ValueId zp = node.input(zero_point);
  return {node.inputs[x], node.inputs[scale], zp, g.value(node.inputs[x]).shape, g.value(node.inputs[scale]).shape,
          g.value(node.inputs[scale]).dtype};
}

// (x - zero_point) * scale in `real`.
Result<ValueId> dequantized(BodyWriter& w, const QuantOperands& o, const QuantizeParams& p, DType real) {
  STRIDER_ASSIGN_OR_RETURN(ValueId xf, cast(w, o.x, p.quantized, real));
  if (o.zero_point != kNoValue) {
    STRIDER_ASSIGN_OR_RETURN(ValueId zp, cast(w, o.zero_point, p.quantized, real));
    STRIDER_ASSIGN_OR_RETURN(zp, spread(w, zp, o.scale_shape, o.x_shape, p));
    STRIDER_ASSIGN_OR_RETURN(xf, w.op("Sub", {xf, zp}));
  }
  STRIDER_ASSIGN_OR_RETURN(ValueId s, cast(w, o.scale, o.scale_dtype, real));
  STRIDER_ASSIGN_OR_RETURN(s, spread(w, s, o.scale_shape, o.x_shape, p));
  return w.op("Mul", {xf, s});
}

// saturate(round(x / scale) + zero_point) as p.quantized, into `out`; x is `real`. To a
// float8 or float4 type: x / scale + zero_point, rounded by the Cast (with `saturate`).
Status quantize_into(BodyWriter& w, ValueId x, const QuantOperands& o, const QuantizeParams& p, DType real, ValueId out) {
  STRIDER_ASSIGN_OR_RETURN(ValueId s, cast(w, o.scale, o.scale_dtype, real));
  STRIDER_ASSIGN_OR_RETURN(s, spread(w, s, o.scale_shape, o.x_shape, p));
  STRIDER_ASSIGN_OR_RETURN(ValueId scaled, w.op("Div", {x, s}));
  if (is_floating(p.quantized)) {
    if (o.zero_point != kNoValue) {
      STRIDER_ASSIGN_OR_RETURN(ValueId zp, cast(w, o.zero_point, p.quantized, real));
      STRIDER_ASSIGN_OR_RETURN(zp, spread(w, zp, o.scale_shape, o.x_shape, p));
      STRIDER_ASSIGN_OR_RETURN(scaled, w.op("Add", {scaled, zp}));
    }
    AttributeMap to = int_attr("to", onnx_type_code(p.quantized));
    to.set_int("saturate", p.saturate ? 1 : 0);
    return w.op("Cast", {scaled}, std::move(to), out).status();
  }
  STRIDER_ASSIGN_OR_RETURN(ValueId q, w.op("Round", {scaled}));
  if (o.zero_point != kNoValue) {
    STRIDER_ASSIGN_OR_RETURN(ValueId zp, cast(w, o.zero_point, p.quantized, real));
    STRIDER_ASSIGN_OR_RETURN(zp, spread(w, zp, o.scale_shape, o.x_shape, p));
    STRIDER_ASSIGN_OR_RETURN(q, w.op("Add", {q, zp}));
  }
  const IntegerRange range = quantized_range(p.quantized);
  STRIDER_ASSIGN_OR_RETURN(ValueId low, w.floats(real, {}, {float(range.low)}));
  STRIDER_ASSIGN_OR_RETURN(ValueId high, w.floats(real, {}, {float(range.high)}));
  STRIDER_ASSIGN_OR_RETURN(ValueId saturated, w.op("Clip", {q, low, high}));
  return w.op("Cast", {saturated}, int_attr("to", onnx_type_code(p.quantized)), out).status();
}

// QLinearMatMul's operand: a scale of one value per row of a ([M]) or per column of b ([N]).
QuantizeParams matmul_operand(const Shape& x, const Shape& scale, DType quantized, bool rows) {
  QuantizeParams p;
  p.quantized = quantized;
  const bool scalar = scale.empty() || scale == Shape{1};
  p.granularity = scalar ? QuantGranularity::kTensor : QuantGranularity::kAxis;
  p.axis = int64_t(x.size()) - (rows ? 2 : 1);
  return p;
}

// (v - zero_point) as f32, the zero point one value or one per index of `axis` of v.
Result<ValueId> centred(BodyWriter& w, const Graph& g, ValueId v, ValueId zero_point, int64_t axis) {
  const DType t = g.value(v).dtype;
  STRIDER_ASSIGN_OR_RETURN(ValueId vf, cast(w, v, t, DType::kF32));
  if (zero_point == kNoValue) return vf;
  const Shape shape = g.value(v).shape, zp_shape = g.value(zero_point).shape;
  QuantizeParams p;
  p.granularity = zp_shape.empty() || zp_shape == Shape{1} ? QuantGranularity::kTensor : QuantGranularity::kAxis;
  p.axis = axis;
  STRIDER_ASSIGN_OR_RETURN(ValueId zp, cast(w, zero_point, g.value(zero_point).dtype, DType::kF32));
  STRIDER_ASSIGN_OR_RETURN(zp, spread(w, zp, zp_shape, shape, p));
  return w.op("Sub", {vf, zp});
}

// The conv attributes of a node (QLinearConv, ConvInteger) for the float Conv of its body.
AttributeMap conv_attributes(const Node& node) {
  AttributeMap a;
  for (const auto& [name, value] : node.attributes.all()) a.set(name, value);
  return a;
}

}  // namespace

Status expand_qlinear_conv(Graph& g, const Node& node, MemoryBudget* budget) {
  const QuantOperands x = operands_of(g, node, 0, 1, 2), wt = operands_of(g, node, 3, 4, 5);
  const QuantOperands y{kNoValue, node.inputs[6], node.inputs[7], g.value(node.outputs[0]).shape, g.value(node.inputs[6]).shape,
                        g.value(node.inputs[6]).dtype};
  QuantizeParams px, pw, py;
  px.quantized = g.value(x.x).dtype;
  pw = matmul_operand(wt.x_shape, wt.scale_shape, g.value(wt.x).dtype, false);
  pw.axis = 0;  // one scale per output channel
  py.quantized = g.value(node.inputs[7]).dtype;
  BodyWriter w(g, node, budget);
  w.at_least_opset(11);  // Round, and Clip with bound inputs
  STRIDER_ASSIGN_OR_RETURN(ValueId xf, dequantized(w, x, px, DType::kF32));
  STRIDER_ASSIGN_OR_RETURN(ValueId wf, dequantized(w, wt, pw, DType::kF32));
  std::vector<ValueId> inputs{xf, wf};
  if (node.input(8) != kNoValue) {  // int32, scaled by x_scale * w_scale
    STRIDER_ASSIGN_OR_RETURN(ValueId xs, cast(w, x.scale, x.scale_dtype, DType::kF32));
    STRIDER_ASSIGN_OR_RETURN(ValueId ws, cast(w, wt.scale, wt.scale_dtype, DType::kF32));
    STRIDER_ASSIGN_OR_RETURN(ValueId bias_scale, w.op("Mul", {xs, ws}));
    STRIDER_ASSIGN_OR_RETURN(ValueId bias, cast(w, node.inputs[8], DType::kI32, DType::kF32));
    STRIDER_ASSIGN_OR_RETURN(bias, w.op("Mul", {bias, bias_scale}));
    inputs.push_back(bias);
  }
  STRIDER_ASSIGN_OR_RETURN(ValueId conv, w.op("Conv", inputs, conv_attributes(node)));
  return quantize_into(w, conv, y, py, DType::kF32, node.outputs[0]);
}

// conv(x - x_zp, w - w_zp) in f32 (exact: ops/quantize.h bounds the sums), cast to int32.
Status expand_conv_integer(Graph& g, const Node& node, MemoryBudget* budget) {
  BodyWriter w(g, node, budget);
  w.at_least_opset(11);  // Round, and Clip with bound inputs
  STRIDER_ASSIGN_OR_RETURN(ValueId xf, centred(w, g, node.inputs[0], node.input(2), 1));
  STRIDER_ASSIGN_OR_RETURN(ValueId wf, centred(w, g, node.inputs[1], node.input(3), 0));
  STRIDER_ASSIGN_OR_RETURN(ValueId conv, w.op("Conv", {xf, wf}, conv_attributes(node)));
  return w.op("Cast", {conv}, int_attr("to", onnx_type_code(DType::kI32)), node.outputs[0]).status();
}

// (A - a_zp) @ (B - b_zp) in f32 (exact, as above), cast to int32; a_zp may be one per row
// of A, b_zp one per column of B.
Status expand_matmul_integer(Graph& g, const Node& node, MemoryBudget* budget) {
  BodyWriter w(g, node, budget);
  w.at_least_opset(11);  // Round, and Clip with bound inputs
  const int64_t a_rank = int64_t(g.value(node.inputs[0]).shape.size()), b_rank = int64_t(g.value(node.inputs[1]).shape.size());
  STRIDER_ASSIGN_OR_RETURN(ValueId af, centred(w, g, node.inputs[0], node.input(2), a_rank - 2));
  STRIDER_ASSIGN_OR_RETURN(ValueId bf, centred(w, g, node.inputs[1], node.input(3), b_rank - 1));
  STRIDER_ASSIGN_OR_RETURN(ValueId product, w.op("MatMul", {af, bf}));
  return w.op("Cast", {product}, int_attr("to", onnx_type_code(DType::kI32)), node.outputs[0]).status();
}

Status expand_quantize_linear(Graph& g, const Node& node, MemoryBudget* budget) {
  STRIDER_ASSIGN_OR_RETURN(QuantizeParams p, resolve_quantize_linear(NodeInputs(g, node)));
  const QuantOperands o = operands_of(g, node, 0, 1, 2);
  BodyWriter w(g, node, budget);
  w.at_least_opset(11);  // Round, and Clip with bound inputs
  return quantize_into(w, o.x, o, p, p.real, node.outputs[0]);
}

Status expand_dequantize_linear(Graph& g, const Node& node, MemoryBudget* budget) {
  STRIDER_ASSIGN_OR_RETURN(QuantizeParams p, resolve_dequantize_linear(NodeInputs(g, node)));
  const QuantOperands o = operands_of(g, node, 0, 1, 2);
  BodyWriter w(g, node, budget);
  w.at_least_opset(11);  // Round, and Clip with bound inputs
  STRIDER_ASSIGN_OR_RETURN(ValueId y, dequantized(w, o, p, p.real));
  return w.op("Identity", {y}, {}, node.outputs[0]).status();
}

// scale = (max(x, 0) - min(x, 0)) / 255, zero point = saturate(round(-min / scale)), then
// QuantizeLinear to uint8 with them.
Status expand_dynamic_quantize_linear(Graph& g, const Node& node, MemoryBudget* budget) {
  BodyWriter w(g, node, budget);
  w.at_least_opset(11);  // Round, and Clip with bound inputs
  const DType t = DType::kF32;
  const AttributeMap all = int_attr("keepdims", 0);
  STRIDER_ASSIGN_OR_RETURN(ValueId zero, w.floats(t, {}, {0.0f}));
  STRIDER_ASSIGN_OR_RETURN(ValueId top, w.floats(t, {}, {255.0f}));
  STRIDER_ASSIGN_OR_RETURN(ValueId low, w.op("ReduceMin", {node.inputs[0]}, all));
  STRIDER_ASSIGN_OR_RETURN(low, w.op("Min", {low, zero}));
  STRIDER_ASSIGN_OR_RETURN(ValueId high, w.op("ReduceMax", {node.inputs[0]}, all));
  STRIDER_ASSIGN_OR_RETURN(high, w.op("Max", {high, zero}));
  STRIDER_ASSIGN_OR_RETURN(ValueId range, w.op("Sub", {high, low}));
  const ValueId scale_out = node.outputs.size() > 1 && node.outputs[1] != kNoValue ? node.outputs[1] : kNoValue;
  STRIDER_ASSIGN_OR_RETURN(ValueId scale, w.op("Div", {range, top}, {}, scale_out));
  STRIDER_ASSIGN_OR_RETURN(ValueId negative_low, w.op("Neg", {low}));
  STRIDER_ASSIGN_OR_RETURN(ValueId shift, w.op("Div", {negative_low, scale}));
  STRIDER_ASSIGN_OR_RETURN(shift, w.op("Round", {shift}));
  STRIDER_ASSIGN_OR_RETURN(shift, w.op("Clip", {shift, zero, top}));
  const ValueId zp_out = node.outputs.size() > 2 && node.outputs[2] != kNoValue ? node.outputs[2] : kNoValue;
  STRIDER_ASSIGN_OR_RETURN(ValueId zp, w.op("Cast", {shift}, int_attr("to", onnx_type_code(DType::kU8)), zp_out));
  QuantizeParams p;  // per tensor, to uint8
  const QuantOperands o{node.inputs[0], scale, zp, g.value(node.inputs[0]).shape, {}, t};
  return quantize_into(w, node.inputs[0], o, p, t, node.outputs[0]);
}

// Dequantize a and b to f32, MatMul, quantize with y's scale and zero point.
Status expand_qlinear_matmul(Graph& g, const Node& node, MemoryBudget* budget) {
  const QuantOperands a = operands_of(g, node, 0, 1, 2), b = operands_of(g, node, 3, 4, 5);
  const QuantOperands y{kNoValue, node.inputs[6], node.inputs[7], g.value(node.outputs[0]).shape, g.value(node.inputs[6]).shape,
                        g.value(node.inputs[6]).dtype};
  const QuantizeParams pa = matmul_operand(a.x_shape, a.scale_shape, g.value(a.x).dtype, true);
  const QuantizeParams pb = matmul_operand(b.x_shape, b.scale_shape, g.value(b.x).dtype, false);
  QuantizeParams py;
  py.quantized = g.value(node.inputs[7]).dtype;
  BodyWriter w(g, node, budget);
  w.at_least_opset(11);  // Round, and Clip with bound inputs
  STRIDER_ASSIGN_OR_RETURN(ValueId af, dequantized(w, a, pa, DType::kF32));
  STRIDER_ASSIGN_OR_RETURN(ValueId bf, dequantized(w, b, pb, DType::kF32));
  STRIDER_ASSIGN_OR_RETURN(ValueId product, w.op("MatMul", {af, bf}));
  return quantize_into(w, product, y, py, DType::kF32, node.outputs[0]);
}

}  // namespace strider::expansion
