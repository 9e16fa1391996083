#include "ops/quantize.h"

#include <fmt/format.h>

#include "base/onnx_types.h"
#include "ops/shape_ops.h"

namespace strider {
namespace {

// What the QLinear and Integer ops take; QuantizeLinear and DequantizeLinear also take the
// 16-bit integers (every one of them is exact in f32, where strider computes) and the
// storage-only float8, float4, 4- and 2-bit types (Cast converts them).
bool quantized_dtype(DType d) { return d == DType::kI8 || d == DType::kU8; }
bool linear_quantized_dtype(DType d) {
  return quantized_dtype(d) || d == DType::kI16 || d == DType::kU16 || is_small_type(d);
}

// The scale's granularity against x (block_size from opset 21, axis from 13).
Status resolve_granularity(const NodeInputs& node, QuantizeParams& p) {
  const Shape& x = node.input_shape(0);
  const Shape& scale = node.input_shape(1);
  STRIDER_ASSIGN_OR_RETURN(int64_t axis, node.attributes().get_int("axis", 1));
  STRIDER_ASSIGN_OR_RETURN(p.block, node.attributes().get_int("block_size", 0));
  const bool scalar = scale.empty() || scale == Shape{1};
  if (p.block > 0) {
    if (!normalize_axis(axis, int64_t(x.size()), &p.axis)) return node.error("axis {} out of range", axis);
    Shape expected = x;
    expected[size_t(p.axis)] = (x[size_t(p.axis)] + p.block - 1) / p.block;
    if (scale != expected)
      return node.error("scale {} must be {} for blocks of {} along axis {}", shape_to_string(scale), shape_to_string(expected),
                        p.block, p.axis);
    p.granularity = QuantGranularity::kBlock;
  } else if (p.block < 0) {
    return node.error("block_size {} is negative", p.block);
  } else if (scalar) {
    p.granularity = QuantGranularity::kTensor;
  } else {
    if (scale.size() != 1 || !normalize_axis(axis, int64_t(x.size()), &p.axis) || scale[0] != x[size_t(p.axis)])
      return node.error("scale {} is not a scalar, nor one per index of axis {} of x {}", shape_to_string(scale), axis,
                        shape_to_string(x));
    p.granularity = QuantGranularity::kAxis;
  }
  if (!is_floating(node.input_dtype(1))) return node.error("scale must be floating");
  p.has_zero_point = node.has_input(2);
  // A per-tensor scale may be a scalar with a [1] zero point (and the other way round).
  const bool both_one = scalar && num_elements(node.input_shape(2)) == 1;
  if (p.has_zero_point && node.input_shape(2) != scale && !both_one)
    return node.error("zero point {} and scale {} differ in shape", shape_to_string(node.input_shape(2)), shape_to_string(scale));
  return Status::ok();
}

Status infer_quantize_linear(InferContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(QuantizeParams p, resolve_quantize_linear(ctx));
  ctx.set_output(0, p.quantized, ctx.input_shape(0));
  return Status::ok();
}

Status infer_dequantize_linear(InferContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(QuantizeParams p, resolve_dequantize_linear(ctx));
  ctx.set_output(0, p.real, ctx.input_shape(0));
  return Status::ok();
}

// y (uint8, x's shape), y_scale and y_zero_point (scalars).
Status infer_dynamic_quantize_linear(InferContext& ctx) {
  if (ctx.input_dtype(0) != DType::kF32) return ctx.error("x must be float32");
  ctx.set_output(0, DType::kU8, ctx.input_shape(0));
  ctx.set_output(1, DType::kF32, {});
  ctx.set_output(2, DType::kU8, {});
  return Status::ok();
}

// QLinearMatMul (a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp): MatMul's shape, y_zp's dtype.
Status infer_qlinear_matmul(InferContext& ctx) {
  const Shape& a = ctx.input_shape(0);
  const Shape& b = ctx.input_shape(3);
  if (a.size() < 2 || b.size() < 2 || a.back() != b[b.size() - 2])
    return ctx.error("a {} and b {} do not multiply", shape_to_string(a), shape_to_string(b));
  Shape batch;
  if (!broadcast_shapes(Shape(a.begin(), a.end() - 2), Shape(b.begin(), b.end() - 2), &batch))
    return ctx.error("batch dims of a {} and b {} do not broadcast", shape_to_string(a), shape_to_string(b));
  batch.push_back(a[a.size() - 2]);
  batch.push_back(b.back());
  for (int i : {0, 2, 3, 5, 7})
    if (!quantized_dtype(ctx.input_dtype(size_t(i)))) return ctx.error("input {} must be int8 or uint8", i);
  ctx.set_output(0, ctx.input_dtype(7), std::move(batch));
  return Status::ok();
}

// QLinearConv (x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, B?): Conv's shape.
Status infer_qlinear_conv(InferContext& ctx) {
  for (int i : {0, 2, 3, 5, 7})
    if (!quantized_dtype(ctx.input_dtype(size_t(i)))) return ctx.error("input {} must be int8 or uint8", i);
  if (ctx.has_input(8) && ctx.input_dtype(8) != DType::kI32) return ctx.error("B must be int32");
  STRIDER_ASSIGN_OR_RETURN(Shape out, conv_output_shape(ctx, ctx.input_shape(0), ctx.input_shape(3)));
  ctx.set_output(0, ctx.input_dtype(7), std::move(out));
  return Status::ok();
}

Status infer_conv_integer(InferContext& ctx) {
  if (!quantized_dtype(ctx.input_dtype(0)) || !quantized_dtype(ctx.input_dtype(1))) return ctx.error("x and w must be int8 or uint8");
  const Shape& w = ctx.input_shape(1);
  STRIDER_ASSIGN_OR_RETURN(Shape out, conv_output_shape(ctx, ctx.input_shape(0), w));
  STRIDER_RETURN_IF_ERROR(exact_integer_terms(num_elements(Shape(w.begin() + 1, w.end()))).status());
  ctx.set_output(0, DType::kI32, std::move(out));
  return Status::ok();
}

Status infer_matmul_integer(InferContext& ctx) {
  if (!quantized_dtype(ctx.input_dtype(0)) || !quantized_dtype(ctx.input_dtype(1))) return ctx.error("A and B must be int8 or uint8");
  const Shape& a = ctx.input_shape(0);
  const Shape& b = ctx.input_shape(1);
  if (a.size() < 2 || b.size() < 2 || a.back() != b[b.size() - 2])
    return ctx.error("A {} and B {} do not multiply", shape_to_string(a), shape_to_string(b));
  STRIDER_RETURN_IF_ERROR(exact_integer_terms(a.back()).status());
  Shape out;
  if (!broadcast_shapes(Shape(a.begin(), a.end() - 2), Shape(b.begin(), b.end() - 2), &out))
    return ctx.error("batch dims of A {} and B {} do not broadcast", shape_to_string(a), shape_to_string(b));
  out.push_back(a[a.size() - 2]);
  out.push_back(b.back());
  ctx.set_output(0, DType::kI32, std::move(out));
  return Status::ok();
}

}  // namespace

Result<int64_t> exact_integer_terms(int64_t terms) {
  if (terms > kExactF32Terms)
    return unsupported(fmt::format("{} products per output; strider computes integer sums in f32, exact only up to {} "
                                   "of them",
                                   terms, kExactF32Terms));
  return terms;
}

Result<QuantizeParams> resolve_quantize_linear(const NodeInputs& node) {
  QuantizeParams p;
  p.real = node.input_dtype(0);
  if (!is_floating(p.real)) return node.error("x is {}, expected a floating type", dtype_name(p.real));
  STRIDER_RETURN_IF_ERROR(resolve_granularity(node, p));
  p.quantized = p.has_zero_point ? node.input_dtype(2) : DType::kU8;
  STRIDER_ASSIGN_OR_RETURN(int64_t output_dtype, node.attributes().get_int("output_dtype", 0));
  if (output_dtype != 0) {
    std::optional<DType> d = dtype_from_onnx_code(int(output_dtype));
    if (!d || (p.has_zero_point && *d != p.quantized)) return node.error("output_dtype {} does not match the zero point", output_dtype);
    p.quantized = *d;
  }
  if (!linear_quantized_dtype(p.quantized))
    return unsupported(fmt::format("QuantizeLinear to {}: strider quantizes to the 2- to 16-bit integers, float8 and float4",
                                   dtype_name(p.quantized)));
  STRIDER_ASSIGN_OR_RETURN(int64_t saturate, node.attributes().get_int("saturate", 1));
  p.saturate = saturate != 0;
  return p;
}

Result<QuantizeParams> resolve_dequantize_linear(const NodeInputs& node) {
  QuantizeParams p;
  p.quantized = node.input_dtype(0);
  if (!linear_quantized_dtype(p.quantized) && p.quantized != DType::kI32)
    return unsupported(fmt::format("DequantizeLinear of {}: strider dequantizes the 2- to 32-bit integers, float8 and float4",
                                   dtype_name(p.quantized)));
  STRIDER_RETURN_IF_ERROR(resolve_granularity(node, p));
  if (p.has_zero_point && node.input_dtype(2) != p.quantized) return node.error("x and its zero point differ in dtype");
  p.real = node.input_dtype(1);
  STRIDER_ASSIGN_OR_RETURN(int64_t output_dtype, node.attributes().get_int("output_dtype", 0));
  if (output_dtype != 0) {
    std::optional<DType> d = dtype_from_onnx_code(int(output_dtype));
    if (!d || !is_floating(*d)) return node.error("output_dtype {} is not a floating type strider has", output_dtype);
    p.real = *d;
  }
  return p;
}

IntegerRange quantized_range(DType dtype) {
  switch (dtype) {
    case DType::kI8: return {-128, 127};
    case DType::kU8: return {0, 255};
    case DType::kI16: return {-32768, 32767};
    case DType::kI4: return {-8, 7};
    case DType::kU4: return {0, 15};
    case DType::kI2: return {-2, 1};
    case DType::kU2: return {0, 3};
    case DType::kU16: return {0, 65535};
    case DType::kI32: return {-2147483648.0, 2147483647.0};
    default: return {0, 0};
  }
}

void register_quantize_ops(std::vector<OpSchema>& ops) {
  ops.push_back({"QuantizeLinear", infer_quantize_linear, {1}});
  ops.push_back({"DequantizeLinear", infer_dequantize_linear, {1}});
  ops.push_back({"DynamicQuantizeLinear", infer_dynamic_quantize_linear, {}});
  ops.push_back({"QLinearMatMul", infer_qlinear_matmul, {1, 4, 6}});
  ops.push_back({"QLinearConv", infer_qlinear_conv, {1, 4, 6}});
  ops.push_back({"ConvInteger", infer_conv_integer, {}});
  ops.push_back({"MatMulInteger", infer_matmul_integer, {}});
}

}  // namespace strider
