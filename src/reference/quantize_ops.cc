// QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear and QLinearMatMul in float64, from
// the ONNX operator definitions: dequantize is (x - zero_point) * scale, quantize is
// saturate(round_half_even(x / scale) + zero_point). The runtime expands them into float
// ops instead (passes/expand_quantize.cc).
#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "base/onnx_types.h"
#include "base/small_types.h"
#include "reference/op_support.h"

namespace strider::ref {
namespace {

// For each element of x (shaped `x`), the index of its scale: per tensor, per index of
// `axis`, or per block of `block` along `axis` (the scale then has x's rank).
Result<std::vector<int64_t>> scale_index(const OpContext& ctx, const Shape& x, const RefTensor& scale) {
  STRIDER_ASSIGN_OR_RETURN(int64_t axis_attr, ctx.attributes().get_int("axis", 1));
  STRIDER_ASSIGN_OR_RETURN(int64_t block, ctx.attributes().get_int("block_size", 0));
  if (block < 0) return invalid_model(fmt::format("attribute 'block_size' is {}, expected 0 or more", block));
  std::vector<int64_t> index(size_t(num_elements(x)), 0);
  if (scale.num_elements() == 1 && block == 0) return index;
  STRIDER_ASSIGN_OR_RETURN(int64_t axis, normalized_axis(axis_attr, int64_t(x.size()), "attribute 'axis'"));
  if (block == 0 && (scale.rank() != 1 || scale.shape[0] != x[size_t(axis)]))
    return invalid_model(fmt::format("scale {} does not match axis {} of {}", describe(scale), axis, shape_to_string(x)));
  if (block > 0) {
    bool fits = scale.rank() == int64_t(x.size());
    for (size_t d = 0; fits && d < x.size(); ++d)
      fits = scale.shape[d] == (int64_t(d) == axis ? (x[d] + block - 1) / block : x[d]);
    if (!fits)
      return invalid_model(fmt::format("a scale blocked by {} along axis {} of {} must be shaped so, not {}", block, axis,
                                       shape_to_string(x), describe(scale)));
  }
  for_each_index(x, [&](int64_t flat, const std::vector<int64_t>& at) {
    if (block == 0) {
      index[size_t(flat)] = at[size_t(axis)];
      return;
    }
    int64_t s = 0;
    for (size_t d = 0; d < x.size(); ++d) s = s * scale.shape[d] + (int64_t(d) == axis ? at[d] / block : at[d]);
    index[size_t(flat)] = s;
  });
  return index;
}

double round_half_even(double v) { return std::nearbyint(v); }  // the default rounding mode

Result<OpOutputs> dequantize_linear_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* x, ctx.input(0, "x"));
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* scale, ctx.input(1, "x_scale"));
  if (!is_integral(x->dtype) && !is_small_type(x->dtype))
    return invalid_model(fmt::format("input 0 (x) is {}, expected an integer, float8 or float4 type", dtype_name(x->dtype)));
  STRIDER_RETURN_IF_ERROR(require_floating(*scale, "input 1 (x_scale)"));
  const RefTensor* zero_point = ctx.optional_input(2);
  if (zero_point && zero_point->dtype != x->dtype) return invalid_model("x and x_zero_point differ in dtype");
  if (zero_point && zero_point->num_elements() != scale->num_elements()) return invalid_model("zero point and scale differ in size");
  STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> index, scale_index(ctx, x->shape, *scale));
  DType out = scale->dtype;
  STRIDER_ASSIGN_OR_RETURN(int64_t output_dtype, ctx.attributes().get_int("output_dtype", 0));
  if (output_dtype != 0) out = dtype_from_onnx_code(int(output_dtype)).value_or(out);
  RefTensor y = RefTensor::zeros(out, x->shape);
  for (int64_t i = 0; i < x->num_elements(); ++i) {
    const size_t s = size_t(index[size_t(i)]);
    const double zp = zero_point ? zero_point->element_as_double(int64_t(s)) : 0.0;
    y.floats[size_t(i)] = (x->element_as_double(i) - zp) * scale->floats[s];
  }
  return OpOutputs{std::move(y)};
}

// x quantized with per-element scale and zero point lookups into `out`'s dtype. A float8 or
// float4 `out` takes x / scale + zero_point rounded to it (with `saturate`), no integer rounding.
RefTensor quantized(const RefTensor& x, const std::vector<int64_t>& index, const RefTensor& scale,
                    const RefTensor* zero_point, DType out, bool saturate = true) {
  RefTensor y = RefTensor::zeros(out, x.shape);
  for (int64_t i = 0; i < x.num_elements(); ++i) {
    const size_t s = size_t(index[size_t(i)]);
    const double zp = zero_point ? zero_point->element_as_double(int64_t(s)) : 0.0;
    if (y.is_floating()) {
      const double ratio = round_to_precision(x.floats[size_t(i)] / round_to_precision(scale.floats[s], scale.dtype), x.dtype);
      y.floats[size_t(i)] = small_type_to_double(small_type_from_double(ratio + zp, out, saturate), out);
      continue;
    }
    // x / scale rounds to x's precision first, as ONNX computes it (a tie after that
    // rounding goes to even; in float64 it might not be a tie).
    // The scale as the value of its dtype: a float64 intermediate (the expanded form
    // computes it with Div) is an f32 tensor to the op.
    const double ratio = round_to_precision(x.floats[size_t(i)] / round_to_precision(scale.floats[s], scale.dtype), x.dtype);
    y.ints[size_t(i)] = saturate_to_dtype(round_half_even(ratio) + zp, out);
  }
  return y;
}

Result<OpOutputs> quantize_linear_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* x, ctx.input(0, "x"));
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* scale, ctx.input(1, "y_scale"));
  STRIDER_RETURN_IF_ERROR(require_floating(*x, "input 0 (x)"));
  STRIDER_RETURN_IF_ERROR(require_floating(*scale, "input 1 (y_scale)"));
  const RefTensor* zero_point = ctx.optional_input(2);
  DType out = zero_point ? zero_point->dtype : DType::kU8;
  STRIDER_ASSIGN_OR_RETURN(int64_t output_dtype, ctx.attributes().get_int("output_dtype", 0));
  if (output_dtype != 0) {
    std::optional<DType> d = dtype_from_onnx_code(int(output_dtype));
    if (!d) return unsupported(fmt::format("output_dtype {}", output_dtype));
    out = *d;
  }
  if (out != DType::kI8 && out != DType::kU8 && out != DType::kI16 && out != DType::kU16 && !is_small_type(out))
    return unsupported(fmt::format("QuantizeLinear to {}", dtype_name(out)));
  if (zero_point && zero_point->num_elements() != scale->num_elements()) return invalid_model("zero point and scale differ in size");
  STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> index, scale_index(ctx, x->shape, *scale));
  STRIDER_ASSIGN_OR_RETURN(int64_t saturate, ctx.attributes().get_int("saturate", 1));
  return OpOutputs{quantized(*x, index, *scale, zero_point, out, saturate != 0)};
}

Result<OpOutputs> dynamic_quantize_linear_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* x, ctx.input(0, "x"));
  STRIDER_RETURN_IF_ERROR(require_floating(*x, "input 0 (x)"));
  double low = 0, high = 0;
  for (double v : x->floats) low = std::min(low, v), high = std::max(high, v);
  RefTensor scale = RefTensor::zeros(DType::kF32, {});
  scale.floats[0] = round_to_precision((high - low) / 255.0, DType::kF32);
  RefTensor zero_point = RefTensor::zeros(DType::kU8, {});
  zero_point.ints[0] = saturate_to_dtype(round_half_even(round_to_precision(-low / scale.floats[0], DType::kF32)), DType::kU8);
  RefTensor y = quantized(*x, std::vector<int64_t>(x->floats.size(), 0), scale, &zero_point, DType::kU8);
  return OpOutputs{std::move(y), std::move(scale), std::move(zero_point)};
}

// (a - a_zp) a_scale times (b - b_zp) b_scale, quantized with y_scale and y_zero_point; a's
// scale may be one per row, b's one per column.
Result<OpOutputs> qlinear_matmul_op(const OpContext& ctx) {
  std::vector<const RefTensor*> in(8);
  for (size_t i = 0; i < 8; ++i) {
    STRIDER_ASSIGN_OR_RETURN(in[i], ctx.input(i, fmt::format("input {}", i)));
  }
  const RefTensor &a = *in[0], &b = *in[3];
  if (a.rank() < 2 || b.rank() < 2 || a.shape.back() != b.shape[b.shape.size() - 2]) return invalid_model("a and b do not multiply");
  if (a.rank() != b.rank()) return unsupported("QLinearMatMul of operands of different ranks");
  const int64_t m = a.shape[a.shape.size() - 2], k = a.shape.back(), n = b.shape.back();
  Shape out = a.shape;
  out.back() = n;
  const int64_t batches = num_elements(Shape(a.shape.begin(), a.shape.end() - 2));
  if (num_elements(Shape(b.shape.begin(), b.shape.end() - 2)) != batches) return unsupported("broadcast batch dims");
  STRIDER_RETURN_IF_ERROR(require_integer(a, "input 0 (a)"));
  STRIDER_RETURN_IF_ERROR(require_integer(b, "input 3 (b)"));
  STRIDER_RETURN_IF_ERROR(require_quant_param(in[1], QuantParam::kScale, m, "input 1 (a_scale)"));
  STRIDER_RETURN_IF_ERROR(require_quant_param(in[2], QuantParam::kZeroPoint, m, "input 2 (a_zero_point)"));
  STRIDER_RETURN_IF_ERROR(require_quant_param(in[4], QuantParam::kScale, n, "input 4 (b_scale)"));
  STRIDER_RETURN_IF_ERROR(require_quant_param(in[5], QuantParam::kZeroPoint, n, "input 5 (b_zero_point)"));
  STRIDER_RETURN_IF_ERROR(require_quant_param(in[6], QuantParam::kScale, 1, "input 6 (y_scale)"));
  STRIDER_RETURN_IF_ERROR(require_quant_param(in[7], QuantParam::kZeroPoint, 1, "input 7 (y_zero_point)"));
  auto per = [](const RefTensor& t, int64_t i) { return t.num_elements() == 1 ? 0 : i; };
  RefTensor y = RefTensor::zeros(in[7]->dtype, out);
  for (int64_t batch = 0; batch < batches; ++batch)
    for (int64_t r = 0; r < m; ++r)
      for (int64_t c = 0; c < n; ++c) {
        double sum = 0;
        for (int64_t j = 0; j < k; ++j) {
          const double av = (double(a.ints[size_t((batch * m + r) * k + j)]) - double(in[2]->ints[size_t(per(*in[2], r))])) *
                            in[1]->floats[size_t(per(*in[1], r))];
          const double bv = (double(b.ints[size_t((batch * k + j) * n + c)]) - double(in[5]->ints[size_t(per(*in[5], c))])) *
                            in[4]->floats[size_t(per(*in[4], c))];
          sum += av * bv;
        }
        const double q = round_half_even(sum / in[6]->floats[0]) + double(in[7]->ints[0]);
        y.ints[size_t((batch * m + r) * n + c)] = saturate_to_dtype(q, y.dtype);
      }
  return OpOutputs{std::move(y)};
}

constexpr OpDefinition kQuantizeOps[] = {
    {"QuantizeLinear", 10, 27, quantize_linear_op},
    {"DequantizeLinear", 10, 27, dequantize_linear_op},
    {"DynamicQuantizeLinear", 11, 27, dynamic_quantize_linear_op},
    {"QLinearMatMul", 10, 27, qlinear_matmul_op},
};

}  // namespace

std::span<const OpDefinition> quantize_op_definitions() { return kQuantizeOps; }

}  // namespace strider::ref
