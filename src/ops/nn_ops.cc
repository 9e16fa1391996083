// Shape functions of the neural-network ops: MatMul, Gemm, Conv, BatchNormalization,
// pooling, Softmax and the reductions.
#include "ops/op_registry.h"
#include "ops/reduce_math.h"
#include "base/checked_math.h"
#include "ops/shape_ops.h"

namespace strider {
namespace {

Status require_float(const NodeInputs& ctx, size_t input) {
  if (!is_floating(ctx.input_dtype(input)))
    return unsupported(fmt::format("input {} has dtype {}; only floating types are supported",
                                   input, dtype_name(ctx.input_dtype(input))));
  return Status::ok();
}

Status infer_matmul(InferContext& ctx) {
  Shape a = ctx.input_shape(0);
  Shape b = ctx.input_shape(1);
  if (a.empty() || b.empty()) return ctx.error("MatMul inputs must have rank >= 1");
  if (ctx.input_dtype(0) != ctx.input_dtype(1)) return ctx.error("inputs have different dtypes");
  bool a_vector = a.size() == 1;
  bool b_vector = b.size() == 1;
  if (a_vector) a.insert(a.begin(), 1);
  if (b_vector) b.push_back(1);
  int64_t k = a.back();
  if (b[b.size() - 2] != k)
    return ctx.error("inner dimensions differ: {} x {}", shape_to_string(ctx.input_shape(0)),
                     shape_to_string(ctx.input_shape(1)));
  Shape batch;
  if (!broadcast_shapes(std::span(a).first(a.size() - 2), std::span(b).first(b.size() - 2), &batch))
    return ctx.error("batch dimensions of {} and {} do not broadcast",
                     shape_to_string(ctx.input_shape(0)), shape_to_string(ctx.input_shape(1)));
  if (!a_vector) batch.push_back(a[a.size() - 2]);
  if (!b_vector) batch.push_back(b.back());
  Shape work = batch;
  work.push_back(k);
  STRIDER_RETURN_IF_ERROR(check_work(ctx, work, "multiply-adds"));
  ctx.set_output(0, ctx.input_dtype(0), std::move(batch));
  return Status::ok();
}

Status infer_gemm(InferContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(int64_t trans_a, ctx.attributes().get_int("transA", 0));
  STRIDER_ASSIGN_OR_RETURN(int64_t trans_b, ctx.attributes().get_int("transB", 0));
  const Shape& a = ctx.input_shape(0);
  const Shape& b = ctx.input_shape(1);
  if (a.size() != 2 || b.size() != 2) return ctx.error("A and B must be matrices");
  int64_t m = trans_a ? a[1] : a[0];
  int64_t k = trans_a ? a[0] : a[1];
  int64_t kb = trans_b ? b[1] : b[0];
  int64_t n = trans_b ? b[0] : b[1];
  if (k != kb) return ctx.error("inner dimensions differ: {} vs {}", k, kb);
  if (ctx.has_input(2)) {
    Shape c;
    if (!broadcast_shapes(ctx.input_shape(2), Shape{m, n}, &c) || c != Shape{m, n})
      return ctx.error("C of shape {} does not broadcast to [{}, {}]",
                       shape_to_string(ctx.input_shape(2)), m, n);
  }
  STRIDER_RETURN_IF_ERROR(check_work(ctx, Shape{m, n, k}, "multiply-adds"));
  ctx.set_output(0, ctx.input_dtype(0), {m, n});
  return Status::ok();
}

Status infer_conv(InferContext& ctx) {
  STRIDER_RETURN_IF_ERROR(require_float(ctx, 0));
  const Shape& w = ctx.input_shape(1);
  if (ctx.has_input(2) && ctx.input_shape(2) != Shape{w.empty() ? 0 : w[0]})
    return ctx.error("B has shape {}, expected [{}]", shape_to_string(ctx.input_shape(2)), w.empty() ? 0 : w[0]);
  STRIDER_ASSIGN_OR_RETURN(Shape out, conv_output_shape(ctx, ctx.input_shape(0), w));
  ctx.set_output(0, ctx.input_dtype(0), std::move(out));
  return Status::ok();
}

Status infer_batch_norm(InferContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(int64_t training, ctx.attributes().get_int("training_mode", 0));
  if (training) return unsupported("BatchNormalization with training_mode=1");
  if (ctx.num_outputs() > 1 && ctx.has_output(1))
    return unsupported("BatchNormalization with running statistics outputs (training)");
  const Shape& x = ctx.input_shape(0);
  if (x.size() < 2) return ctx.error("X must have rank >= 2");
  for (size_t i = 1; i < 5; ++i)
    if (ctx.input_shape(i) != Shape{x[1]})
      return ctx.error("input {} has shape {}, expected [{}]", i,
                       shape_to_string(ctx.input_shape(i)), x[1]);
  ctx.set_output(0, ctx.input_dtype(0), x);
  return Status::ok();
}

Status infer_pool(InferContext& ctx) {
  // MaxPool also takes 8-bit integers (opset 12); AveragePool only floats.
  bool integer_max = ctx.node().op_type == "MaxPool" &&
                     (ctx.input_dtype(0) == DType::kI8 || ctx.input_dtype(0) == DType::kU8);
  if (!integer_max) STRIDER_RETURN_IF_ERROR(require_float(ctx, 0));
  const Shape& x = ctx.input_shape(0);
  if (x.size() < 3) return ctx.error("X must have rank >= 3");
  STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> kernel, ctx.attributes().require_ints("kernel_shape"));
  STRIDER_ASSIGN_OR_RETURN(int64_t ceil_mode, ctx.attributes().get_int("ceil_mode", 0));
  STRIDER_ASSIGN_OR_RETURN(WindowGeometry g,
                           resolve_window(ctx, std::span(x).subspan(2), kernel, ceil_mode != 0));
  Shape out = {x[0], x[1]};
  out.insert(out.end(), g.output.begin(), g.output.end());
  Shape work = out;  // each output reads at most the taps inside the input (ops/window_taps.h)
  for (size_t d = 0; d < kernel.size(); ++d) work.push_back(std::min(kernel[d], x[d + 2]));
  STRIDER_RETURN_IF_ERROR(check_work(ctx, work, "window reads"));
  ctx.set_output(0, ctx.input_dtype(0), out);
  ctx.set_output(1, DType::kI64, out);  // MaxPool's optional Indices
  return Status::ok();
}

Status infer_global_pool(InferContext& ctx) {
  STRIDER_RETURN_IF_ERROR(require_float(ctx, 0));
  Shape out = ctx.input_shape(0);
  if (out.size() < 3) return ctx.error("X must have rank >= 3");
  for (size_t i = 2; i < out.size(); ++i) out[i] = 1;
  ctx.set_output(0, ctx.input_dtype(0), std::move(out));
  return Status::ok();
}

Status infer_softmax(InferContext& ctx) {
  STRIDER_RETURN_IF_ERROR(require_float(ctx, 0));
  int64_t rank = ctx.input_rank(0);
  STRIDER_ASSIGN_OR_RETURN(int64_t axis, ctx.attributes().get_int("axis", ctx.opset() < 13 ? 1 : -1));
  int64_t normalized = 0;
  if (!normalize_axis(axis, std::max<int64_t>(rank, 1), &normalized))
    return ctx.error("axis {} out of range for rank {}", axis, rank);
  ctx.set_output(0, ctx.input_dtype(0), ctx.input_shape(0));
  return Status::ok();
}

Status infer_reduce(InferContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(ReduceParams p, resolve_reduce(ctx));
  Shape out = ctx.input_shape(0);
  if (!p.noop) {
    for (auto it = p.axes.rbegin(); it != p.axes.rend(); ++it) {
      if (p.keepdims) out[size_t(*it)] = 1;
      else out.erase(out.begin() + *it);
    }
  }
  ctx.set_output(0, ctx.input_dtype(0), std::move(out));
  return Status::ok();
}

}  // namespace

Result<Shape> conv_output_shape(const NodeInputs& node, const Shape& x, const Shape& w) {
  if (x.size() < 3 || w.size() != x.size())
    return node.error("X {} and W {} must have the same rank >= 3", shape_to_string(x), shape_to_string(w));
  STRIDER_ASSIGN_OR_RETURN(int64_t group, node.attributes().get_int("group", 1));
  if (group <= 0 || checked_mul(w[1], group) != x[1] || w[0] % group != 0)
    return node.error("X has {} channels but W {} with group {} does not take them", x[1], shape_to_string(w), group);
  std::span<const int64_t> kernel(w.begin() + 2, w.end());
  STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> kernel_attr,
                           node.attributes().get_ints("kernel_shape", Shape(kernel.begin(), kernel.end())));
  if (!std::equal(kernel.begin(), kernel.end(), kernel_attr.begin(), kernel_attr.end()))
    return node.error("kernel_shape {} differs from W's {}", shape_to_string(kernel_attr), shape_to_string(kernel));
  STRIDER_ASSIGN_OR_RETURN(WindowGeometry g, resolve_window(node, std::span(x).subspan(2), kernel, false));
  Shape out = {x[0], w[0]};
  out.insert(out.end(), g.output.begin(), g.output.end());
  Shape work = out;  // each output: in-channels per group x kernel
  work.insert(work.end(), w.begin() + 1, w.end());
  STRIDER_RETURN_IF_ERROR(check_work(node, work, "multiply-adds"));
  return out;
}

void register_nn_ops(std::vector<OpSchema>& ops) {
  ops.push_back({"MatMul", infer_matmul, {}});
  ops.push_back({"Gemm", infer_gemm, {}});
  ops.push_back({"Conv", infer_conv, {}});
  ops.push_back({"BatchNormalization", infer_batch_norm, {}, {}, {.in_place = true}});
  ops.push_back({"MaxPool", infer_pool, {}});
  ops.push_back({"AveragePool", infer_pool, {}});
  ops.push_back({"GlobalAveragePool", infer_global_pool, {}});
  ops.push_back({"GlobalMaxPool", infer_global_pool, {}});
  ops.push_back({"Softmax", infer_softmax, {}});
  ops.push_back({"LogSoftmax", infer_softmax, {}});
#define STRIDER_REDUCE_SCHEMA(op, name) ops.push_back({name, infer_reduce, {}, {1}});
  STRIDER_REDUCE_OPS(STRIDER_REDUCE_SCHEMA)
#undef STRIDER_REDUCE_SCHEMA
}

}  // namespace strider
