// Shape functions of elementwise ops: unary, binary with numpy broadcasting, comparisons,
// Where, Clip.
#include "base/shape.h"
#include "ops/op_registry.h"

namespace strider {
namespace {

Status infer_unary(InferContext& ctx) {
  if (ctx.num_inputs() < 1 || !ctx.has_input(0)) return ctx.error("needs 1 input");
  ctx.set_output(0, ctx.input_dtype(0), ctx.input_shape(0));
  return Status::ok();
}

Status broadcast_inputs(InferContext& ctx, size_t count, Shape* out) {
  if (ctx.num_inputs() < count) return ctx.error("needs {} inputs, got {}", count, ctx.num_inputs());
  Shape shape = ctx.input_shape(0);
  for (size_t i = 1; i < count; ++i) {
    Shape next;
    if (!broadcast_shapes(shape, ctx.input_shape(i), &next))
      return ctx.error("input shapes {} and {} do not broadcast", shape_to_string(shape),
                       shape_to_string(ctx.input_shape(i)));
    shape = std::move(next);
  }
  *out = std::move(shape);
  return Status::ok();
}

Status infer_binary(InferContext& ctx) {
  Shape shape;
  STRIDER_RETURN_IF_ERROR(broadcast_inputs(ctx, 2, &shape));
  if (ctx.input_dtype(0) != ctx.input_dtype(1))
    return ctx.error("inputs have different dtypes {} and {}", dtype_name(ctx.input_dtype(0)),
                     dtype_name(ctx.input_dtype(1)));
  ctx.set_output(0, ctx.input_dtype(0), std::move(shape));
  return Status::ok();
}

// Pow's exponent may have another type than its base; the result has the base's type.
Status infer_pow(InferContext& ctx) {
  Shape shape;
  STRIDER_RETURN_IF_ERROR(broadcast_inputs(ctx, 2, &shape));
  ctx.set_output(0, ctx.input_dtype(0), std::move(shape));
  return Status::ok();
}

Status infer_comparison(InferContext& ctx) {
  Shape shape;
  STRIDER_RETURN_IF_ERROR(broadcast_inputs(ctx, 2, &shape));
  if (ctx.input_dtype(0) != ctx.input_dtype(1))
    return ctx.error("inputs have different dtypes {} and {}", dtype_name(ctx.input_dtype(0)),
                     dtype_name(ctx.input_dtype(1)));
  ctx.set_output(0, DType::kBool, std::move(shape));
  return Status::ok();
}

Status infer_where(InferContext& ctx) {
  Shape shape;
  STRIDER_RETURN_IF_ERROR(broadcast_inputs(ctx, 3, &shape));
  if (ctx.input_dtype(0) != DType::kBool) return ctx.error("condition must be bool");
  if (ctx.input_dtype(1) != ctx.input_dtype(2)) return ctx.error("X and Y have different dtypes");
  ctx.set_output(0, ctx.input_dtype(1), std::move(shape));
  return Status::ok();
}

Status infer_clip(InferContext& ctx) {
  for (size_t i = 1; i < 3; ++i) {
    if (!ctx.has_input(i)) continue;
    if (num_elements(ctx.input_shape(i)) != 1) return ctx.error("input {} must be a scalar", i);
    if (ctx.input_dtype(i) != ctx.input_dtype(0))
      return ctx.error("input {} has dtype {}, expected {}", i, dtype_name(ctx.input_dtype(i)),
                       dtype_name(ctx.input_dtype(0)));
  }
  return infer_unary(ctx);
}

// Sum, Min, Max, Mean: variadic with broadcasting.
Status infer_variadic(InferContext& ctx) {
  if (ctx.num_inputs() < 1) return ctx.error("needs at least 1 input");
  Shape shape;
  STRIDER_RETURN_IF_ERROR(broadcast_inputs(ctx, ctx.num_inputs(), &shape));
  for (size_t i = 1; i < ctx.num_inputs(); ++i)
    if (ctx.input_dtype(i) != ctx.input_dtype(0)) return ctx.error("inputs have different dtypes");
  ctx.set_output(0, ctx.input_dtype(0), std::move(shape));
  return Status::ok();
}

}  // namespace

void register_elementwise_ops(std::vector<OpSchema>& ops) {
  for (std::string_view op : {"Relu", "LeakyRelu", "Sigmoid", "Tanh", "HardSigmoid", "HardSwish",
                              "Exp", "Log", "Sqrt", "Erf", "Neg", "Abs", "Softplus", "Elu",
                              "Selu", "Reciprocal", "Floor", "Ceil", "Sin", "Cos", "Not"})
    ops.push_back({op, infer_unary, {}, {}, {.in_place = true}});
  for (std::string_view op : {"Add", "Sub", "Mul", "Div", "And", "Or", "Xor"})
    ops.push_back({op, infer_binary, {}, {}, {.in_place = true}});
  ops.push_back({"Pow", infer_pow, {}, {}, {.in_place = true}});
  for (std::string_view op : {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"})
    ops.push_back({op, infer_comparison, {}});
  for (std::string_view op : {"Sum", "Min", "Max", "Mean"}) ops.push_back({op, infer_variadic, {}, {}, {.in_place = true}});
  ops.push_back({"Where", infer_where, {}, {}, {.in_place = true}});
  ops.push_back({"Clip", infer_clip, {}, {}, {.in_place = true}});
}

}  // namespace strider
