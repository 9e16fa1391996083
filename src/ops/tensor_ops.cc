// Shape functions of data-movement and shape ops: Split, Concat, Slice, Reshape,
// Transpose, Squeeze, Unsqueeze, Flatten, Identity, Expand, Gather, Cast, and the ops
// whose output is known at session creation (Constant, ConstantOfShape, Shape, Range).
#include <algorithm>
#include <cmath>
#include <limits>

#include "base/float16.h"
#include "base/checked_math.h"
#include "ops/op_registry.h"
#include "ops/shape_ops.h"

namespace strider {
namespace {

Status infer_identity(InferContext& ctx) {
  ctx.set_output(0, ctx.input_dtype(0), ctx.input_shape(0));
  return Status::ok();
}

// Dropout at inference: the output is the input (a view), the mask all true (a constant).
// Training mode, when a constant true with a ratio that is not 0, is random: refused.
Status infer_dropout(InferContext& ctx) {
  if (ctx.opset() >= 12 && ctx.has_input(2)) {
    const Tensor* training = ctx.input_constant(2);
    if (training == nullptr) return unsupported("Dropout's training_mode is computed at run time; strider runs inference only");
    const Tensor* ratio = ctx.input_constant(1);
    const bool zero_ratio = ratio != nullptr && ratio->num_elements() == 1 && ratio->element_as_double(0) == 0;
    if (training->num_elements() == 1 && training->element_as_int(0) != 0 && !zero_ratio)
      return unsupported("Dropout in training mode (random) is not supported; strider runs inference only");
  }
  ctx.set_output(0, ctx.input_dtype(0), ctx.input_shape(0));
  if (ctx.has_output(1)) {
    constexpr int64_t kMaxMaskElements = int64_t(1) << 28;
    const int64_t count = num_elements(ctx.input_shape(0));
    if (count > kMaxMaskElements) return unsupported(fmt::format("a Dropout mask of {} elements", count));
    Tensor mask(DType::kBool, ctx.input_shape(0));
    std::fill(mask.data<uint8_t>(), mask.data<uint8_t>() + count, uint8_t(1));
    ctx.set_output_constant(1, std::move(mask));
  }
  return Status::ok();
}

Status infer_split(InferContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(SplitParams params, resolve_split(ctx));
  Shape shape = ctx.input_shape(0);
  for (size_t i = 0; i < params.sizes.size(); ++i) {
    shape[size_t(params.axis)] = params.sizes[i];
    ctx.set_output(i, ctx.input_dtype(0), shape);
  }
  return Status::ok();
}

Status infer_concat(InferContext& ctx) {
  if (ctx.num_inputs() < 1) return ctx.error("needs at least 1 input");
  STRIDER_ASSIGN_OR_RETURN(int64_t axis_attr, ctx.attributes().require_int("axis"));
  int64_t rank = ctx.input_rank(0);
  int64_t axis = 0;
  if (!normalize_axis(axis_attr, rank, &axis))
    return ctx.error("axis {} out of range for rank {}", axis_attr, rank);
  Shape shape = ctx.input_shape(0);
  shape[size_t(axis)] = 0;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const Shape& s = ctx.input_shape(i);
    if (int64_t(s.size()) != rank || ctx.input_dtype(i) != ctx.input_dtype(0))
      return ctx.error("input {} is {}{}, not compatible with input 0 {}{}", i,
                       dtype_name(ctx.input_dtype(i)), shape_to_string(s),
                       dtype_name(ctx.input_dtype(0)), shape_to_string(ctx.input_shape(0)));
    for (int64_t d = 0; d < rank; ++d)
      if (d != axis && s[size_t(d)] != ctx.input_shape(0)[size_t(d)])
        return ctx.error("input {} has shape {}, which differs from input 0 {} off axis {}", i,
                         shape_to_string(s), shape_to_string(ctx.input_shape(0)), axis);
    auto sum = checked_add(shape[size_t(axis)], s[size_t(axis)]);
    if (!sum) return ctx.error("the inputs' sizes along axis {} add up past 2^63", axis);
    shape[size_t(axis)] = *sum;
  }
  ctx.set_output(0, ctx.input_dtype(0), std::move(shape));
  return Status::ok();
}

Status infer_slice(InferContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(std::vector<SliceAxis> axes, resolve_slice(ctx));
  Shape shape = ctx.input_shape(0);
  for (const SliceAxis& a : axes) shape[size_t(a.axis)] = a.count;
  ctx.set_output(0, ctx.input_dtype(0), std::move(shape));
  return Status::ok();
}

Status infer_reshape(InferContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(Shape shape, resolve_reshape(ctx));
  ctx.set_output(0, ctx.input_dtype(0), std::move(shape));
  return Status::ok();
}

Status infer_transpose(InferContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> perm, resolve_transpose(ctx));
  Shape shape(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) shape[i] = ctx.input_shape(0)[size_t(perm[i])];
  ctx.set_output(0, ctx.input_dtype(0), std::move(shape));
  return Status::ok();
}

Status infer_squeeze(InferContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(Shape shape, resolve_squeeze(ctx));
  ctx.set_output(0, ctx.input_dtype(0), std::move(shape));
  return Status::ok();
}

Status infer_unsqueeze(InferContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(Shape shape, resolve_unsqueeze(ctx));
  ctx.set_output(0, ctx.input_dtype(0), std::move(shape));
  return Status::ok();
}

Status infer_flatten(InferContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(int64_t axis_attr, ctx.attributes().get_int("axis", 1));
  int64_t rank = ctx.input_rank(0);
  int64_t axis = axis_attr < 0 ? axis_attr + rank : axis_attr;
  if (axis < 0 || axis > rank) return ctx.error("axis {} out of range for rank {}", axis_attr, rank);
  const Shape& in = ctx.input_shape(0);
  int64_t outer = num_elements(std::span(in).first(size_t(axis)));
  int64_t inner = num_elements(std::span(in).subspan(size_t(axis)));
  ctx.set_output(0, ctx.input_dtype(0), {outer, inner});
  return Status::ok();
}

Status infer_expand(InferContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> target, ctx.constant_ints(1, "shape"));
  Shape shape;
  if (!broadcast_shapes(ctx.input_shape(0), target, &shape))
    return ctx.error("input shape {} does not broadcast with {}",
                     shape_to_string(ctx.input_shape(0)), shape_to_string(target));
  ctx.set_output(0, ctx.input_dtype(0), std::move(shape));
  return Status::ok();
}

Status infer_gather(InferContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(int64_t axis_attr, ctx.attributes().get_int("axis", 0));
  int64_t rank = ctx.input_rank(0);
  int64_t axis = 0;
  if (!normalize_axis(axis_attr, rank, &axis))
    return ctx.error("axis {} out of range for rank {}", axis_attr, rank);
  if (ctx.input_dtype(1) != DType::kI64 && ctx.input_dtype(1) != DType::kI32)
    return ctx.error("indices must be i64 or i32, got {}", dtype_name(ctx.input_dtype(1)));
  if (const Tensor* indices = ctx.input_constant(1)) {
    int64_t dim = ctx.input_shape(0)[size_t(axis)];
    for (int64_t i = 0; i < indices->num_elements(); ++i) {
      int64_t index = indices->element_as_int(i);
      if (index < -dim || index >= dim)
        return ctx.error("index {} out of range for axis {} of size {}", index, axis, dim);
    }
  }
  const Shape& data = ctx.input_shape(0);
  Shape shape(data.begin(), data.begin() + axis);
  shape.insert(shape.end(), ctx.input_shape(1).begin(), ctx.input_shape(1).end());
  shape.insert(shape.end(), data.begin() + axis + 1, data.end());
  ctx.set_output(0, ctx.input_dtype(0), std::move(shape));
  return Status::ok();
}

// GatherElements: indices of data's rank pick, along `axis`, one element per output
// position (the output has the indices' shape; its other dims must fit data's).
Status infer_gather_elements(InferContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(int64_t axis, resolve_gather_elements_axis(ctx));
  const Shape& data = ctx.input_shape(0);
  const Shape& indices = ctx.input_shape(1);
  for (size_t d = 0; d < data.size(); ++d)
    if (int64_t(d) != axis && indices[d] > data[d])
      return ctx.error("indices {} do not fit data {} on axis {}", shape_to_string(indices), shape_to_string(data), d);
  if (const Tensor* constant = ctx.input_constant(1)) {
    const int64_t dim = data[size_t(axis)];
    for (int64_t i = 0; i < constant->num_elements(); ++i) {
      int64_t index = constant->element_as_int(i);
      if (index < -dim || index >= dim) return ctx.error("index {} out of range for axis {} of size {}", index, axis, dim);
    }
  }
  ctx.set_output(0, ctx.input_dtype(0), indices);
  return Status::ok();
}

Status infer_arg_reduce(InferContext& ctx) {
  if (ctx.input_dtype(0) == DType::kBool) return ctx.error("input is bool, expected a numeric type");
  STRIDER_ASSIGN_OR_RETURN(ArgReduceParams p, resolve_arg_reduce(ctx));
  Shape shape = ctx.input_shape(0);
  if (p.keepdims) shape[size_t(p.axis)] = 1;
  else shape.erase(shape.begin() + p.axis);
  ctx.set_output(0, DType::kI64, std::move(shape));
  return Status::ok();
}

Status infer_topk(InferContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(TopKParams p, resolve_topk(ctx));
  Shape shape = ctx.input_shape(0);
  shape[size_t(p.axis)] = p.k;
  ctx.set_output(0, ctx.input_dtype(0), shape);
  ctx.set_output(1, DType::kI64, shape);
  return Status::ok();
}

Status infer_cumsum(InferContext& ctx) {
  if (ctx.input_dtype(0) == DType::kBool) return ctx.error("input is bool, expected a numeric type");
  STRIDER_RETURN_IF_ERROR(resolve_cumsum(ctx).status());
  ctx.set_output(0, ctx.input_dtype(0), ctx.input_shape(0));
  return Status::ok();
}

Status infer_trilu(InferContext& ctx) {
  STRIDER_RETURN_IF_ERROR(resolve_trilu(ctx).status());
  ctx.set_output(0, ctx.input_dtype(0), ctx.input_shape(0));
  return Status::ok();
}

Status infer_cast(InferContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(DType to, cast_target(ctx));
  ctx.set_output(0, to, ctx.input_shape(0));
  return Status::ok();
}

Status infer_cast_like(InferContext& ctx) {
  ctx.set_output(0, ctx.input_dtype(1), ctx.input_shape(0));
  return Status::ok();
}

Status infer_shape(InferContext& ctx) {
  const Shape& in = ctx.input_shape(0);
  int64_t rank = int64_t(in.size());
  STRIDER_ASSIGN_OR_RETURN(int64_t start, ctx.attributes().get_int("start", 0));
  STRIDER_ASSIGN_OR_RETURN(int64_t end, ctx.attributes().get_int("end", rank));
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, 0, rank);
  std::vector<int64_t> dims;
  for (int64_t d = start; d < end; ++d) dims.push_back(in[size_t(d)]);
  int64_t count = int64_t(dims.size());
  ctx.set_output_constant(0, Tensor::from_values<int64_t>(DType::kI64, {count}, dims));
  return Status::ok();
}

Status infer_size(InferContext& ctx) {
  std::vector<int64_t> n = {num_elements(ctx.input_shape(0))};
  ctx.set_output_constant(0, Tensor::from_values<int64_t>(DType::kI64, {}, n));
  return Status::ok();
}

Status infer_constant(InferContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(Tensor value, constant_value(ctx.attributes()));
  ctx.set_output_constant(0, std::move(value));
  return Status::ok();
}

Status infer_constant_of_shape(InferContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> shape, ctx.constant_ints(0, "shape"));
  for (int64_t d : shape)
    if (d < 0) return ctx.error("negative dimension in shape {}", shape_to_string(shape));
  DType dtype = DType::kF32;
  if (const Attribute* a = ctx.attributes().find("value")) {
    if (a->kind != Attribute::Kind::kTensor || a->tensor->num_elements() != 1)
      return ctx.error("attribute 'value' must be a one-element tensor");
    dtype = a->tensor->dtype();
  }
  ctx.set_output(0, dtype, std::move(shape));
  return Status::ok();
}

Status infer_range(InferContext& ctx) {
  // Scalars, or one-element vectors as ONNX's own function bodies pass them (AffineGrid's
  // sizes come from a Split) and ONNX Runtime accepts.
  for (size_t i = 0; i < 3; ++i)
    if (num_elements(ctx.input_shape(i)) != 1 || ctx.input_rank(i) > 1 || ctx.input_dtype(i) != ctx.input_dtype(0))
      return ctx.error("start, limit and delta must be scalars (or one-element vectors) of one dtype");
  STRIDER_ASSIGN_OR_RETURN(int64_t count, range_count(ctx));
  ctx.set_output(0, ctx.input_dtype(0), {count});
  return Status::ok();
}

}  // namespace

void register_tensor_ops(std::vector<OpSchema>& ops) {
  ops.push_back({"Identity", infer_identity, {}, {}, {.view = ViewKind::kSameElements}});
  // ratio and training_mode decide what Dropout is: they must be known at session creation.
  ops.push_back({"Dropout", infer_dropout, {}, {1, 2}, {.view = ViewKind::kSameElements}});
  ops.push_back({"Split", infer_split, {}, {1}, {.view = ViewKind::kSplit}});
  ops.push_back({"Concat", infer_concat, {}});
  ops.push_back({"Slice", infer_slice, {}, {1, 2, 3, 4}, {.view = ViewKind::kSlice}});
  ops.push_back({"Reshape", infer_reshape, {}, {1}, {.view = ViewKind::kSameElements}});
  ops.push_back({"Transpose", infer_transpose, {}, {}, {.view = ViewKind::kTranspose}});
  ops.push_back({"Squeeze", infer_squeeze, {}, {1}, {.view = ViewKind::kSameElements}});
  ops.push_back({"Unsqueeze", infer_unsqueeze, {}, {1}, {.view = ViewKind::kSameElements}});
  ops.push_back({"Flatten", infer_flatten, {}, {}, {.view = ViewKind::kSameElements}});
  ops.push_back({"Expand", infer_expand, {}, {1}, {.view = ViewKind::kExpand}});
  ops.push_back({"Gather", infer_gather, {}, {}, {.view = ViewKind::kGather}});
  ops.push_back({"GatherElements", infer_gather_elements, {}});
  ops.push_back({"Trilu", infer_trilu, {}, {1}});
  ops.push_back({"ArgMax", infer_arg_reduce, {}});
  ops.push_back({"CumSum", infer_cumsum, {}, {1}});
  ops.push_back({"CumProd", infer_cumsum, {}, {1}});
  ops.push_back({"TopK", infer_topk, {}, {1}});
  ops.push_back({"ArgMin", infer_arg_reduce, {}});
  ops.push_back({"Cast", infer_cast, {}});
  ops.push_back({"CastLike", infer_cast_like, {}});
  ops.push_back({"Shape", infer_shape, {}});
  ops.push_back({"Size", infer_size, {}});
  ops.push_back({"Constant", infer_constant, {}});
  ops.push_back({"ConstantOfShape", infer_constant_of_shape, {}, {0}});
  ops.push_back({"Range", infer_range, {}, {0, 1, 2}});
}

}  // namespace strider
