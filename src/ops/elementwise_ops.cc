// Shape functions of elementwise ops: every row of the table in ops/elementwise_math.h
// (unary, binary with numpy broadcasting, comparisons, tests), and Where, Clip, Pow and
// the variadic Sum/Min/Max/Mean.
#include "base/shape.h"
#include "ops/elementwise_params.h"
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

// The bitwise ops take integers only (ONNX's type constraint; the signature check of the
// newer ops does not say so).
Status infer_integer(InferContext& ctx) {
  if (ctx.num_inputs() >= 1 && ctx.has_input(0) && !is_integral(ctx.input_dtype(0)))
    return ctx.error("input 0 is {}, expected an integer type", dtype_name(ctx.input_dtype(0)));
  return ctx.num_inputs() == 1 ? infer_unary(ctx) : infer_binary(ctx);
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

// IsNaN, IsInf: a floating input, a bool output.
Status infer_test(InferContext& ctx) {
  if (ctx.num_inputs() < 1 || !ctx.has_input(0)) return ctx.error("needs 1 input");
  ctx.set_output(0, DType::kBool, ctx.input_shape(0));
  return Status::ok();
}

// PRelu: the slope broadcasts to X's shape (one way: the output is X's shape).
Status infer_prelu(InferContext& ctx) {
  STRIDER_RETURN_IF_ERROR(infer_binary(ctx));
  Shape shape;
  broadcast_shapes(ctx.input_shape(0), ctx.input_shape(1), &shape);
  if (shape != ctx.input_shape(0))
    return ctx.error("slope {} does not broadcast to X {}", shape_to_string(ctx.input_shape(1)),
                     shape_to_string(ctx.input_shape(0)));
  return Status::ok();
}

// The shape function of a table row by its kind.
InferFn infer_of(ElementwiseKind kind) {
  switch (kind) {
    case ElementwiseKind::kFloatUnary:
    case ElementwiseKind::kNumericUnary:
    case ElementwiseKind::kLogicUnary: return infer_unary;
    case ElementwiseKind::kNumericBinary:
    case ElementwiseKind::kLogicBinary: return infer_binary;
    case ElementwiseKind::kIntegerUnary:
    case ElementwiseKind::kIntegerBinary: return infer_integer;
    case ElementwiseKind::kCompare: return infer_comparison;
    case ElementwiseKind::kFloatTest: return infer_test;
  }
  return infer_unary;
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
  // Sum and Mean take float types in every opset (Min and Max take integers too); the
  // signature check cannot say so for opsets newer than libonnx knows, and a Mean of u64
  // near 2^64 made the CPU's scale overflow its conversion back (a fuzzed opset-18 model).
  const bool float_only = ctx.node().op_type == "Sum" || ctx.node().op_type == "Mean";
  if (float_only && !is_floating(ctx.input_dtype(0)))
    return ctx.error("takes float tensors, not {}", dtype_name(ctx.input_dtype(0)));
  ctx.set_output(0, ctx.input_dtype(0), std::move(shape));
  return Status::ok();
}

}  // namespace

void register_elementwise_ops(std::vector<OpSchema>& ops) {
  // The table's rows whose kernels every device makes from the functor; results of the
  // operands' type may be written over a dying operand.
#define STRIDER_REGISTER(name, kind, kernel, params)                                     \
  if (ElementwiseKernel::kernel == ElementwiseKernel::kMap) {                            \
    constexpr bool same_type = elementwise_fusable(ElementwiseKind::kind) ||              \
                               ElementwiseKind::kind == ElementwiseKind::kLogicUnary ||  \
                               ElementwiseKind::kind == ElementwiseKind::kLogicBinary || \
                               ElementwiseKind::kind == ElementwiseKind::kIntegerUnary || \
                               ElementwiseKind::kind == ElementwiseKind::kIntegerBinary; \
    ops.push_back({#name, infer_of(ElementwiseKind::kind), {}, {}, {.in_place = same_type}}); \
  }
  STRIDER_ELEMENTWISE_OPS(STRIDER_REGISTER)
#undef STRIDER_REGISTER
  for (OpSchema& op : ops)
    if (op.op_type == "PRelu") op.infer = infer_prelu;
  ops.push_back({"Pow", infer_pow, {}, {}, {.in_place = true}});
  for (std::string_view op : {"Sum", "Min", "Max", "Mean"}) ops.push_back({op, infer_variadic, {}, {}, {.in_place = true}});
  ops.push_back({"Where", infer_where, {}, {}, {.in_place = true}});
  ops.push_back({"Clip", infer_clip, {}, {}, {.in_place = true}});
}

}  // namespace strider
