#include "ops/normalization.h"

#include <fmt/format.h>

#include <algorithm>

#include "base/onnx_types.h"
#include "base/shape.h"

namespace strider {
namespace {

Result<int64_t> axis_of(const NodeInputs& node, int64_t axis, int64_t rank) {
  int64_t normalized = 0;
  if (!normalize_axis(axis, rank, &normalized))
    return node.error("axis {} is outside [-{}, {})", axis, rank, rank);
  return normalized;
}

std::vector<int64_t> dims_from(int64_t first, int64_t rank) {
  std::vector<int64_t> dims;
  for (int64_t d = first; d < rank; ++d) dims.push_back(d);
  return dims;
}

Status resolve_layer_like(const NodeInputs& node, NormalizationParams& p, float default_epsilon) {
  const int64_t rank = node.input_rank(0);
  STRIDER_ASSIGN_OR_RETURN(int64_t axis_attr, node.attributes().get_int("axis", -1));
  STRIDER_ASSIGN_OR_RETURN(int64_t axis, axis_of(node, axis_attr, rank));
  STRIDER_ASSIGN_OR_RETURN(p.epsilon, node.attributes().get_float("epsilon", default_epsilon));
  p.axes = p.param_dims = dims_from(axis, rank);
  p.scale_input = 1;
  return Status::ok();
}

Status resolve_group(const NodeInputs& node, NormalizationParams& p) {
  const int64_t rank = node.input_rank(0);
  if (rank < 2) return node.error("X must have rank 2 or more, not {}", rank);
  STRIDER_ASSIGN_OR_RETURN(int64_t groups, node.attributes().require_int("num_groups"));
  const int64_t channels = node.input_shape(0)[1];
  if (groups < 1 || channels % groups != 0)
    return node.error("num_groups {} does not divide the {} channels", groups, channels);
  STRIDER_ASSIGN_OR_RETURN(p.epsilon, node.attributes().get_float("epsilon", 1e-5f));
  p.groups = groups;
  p.axes = dims_from(2, rank + 1);  // [N, G, C / G, spatial...]: all but N and G
  // Opset 18 took scale and bias per group; 21 per channel.
  p.param_dims = node.opset() >= 21 ? std::vector<int64_t>{1, 2} : std::vector<int64_t>{1};
  p.scale_input = 1;
  p.bias_input = 2;
  return Status::ok();
}

Status resolve_mvn(const NodeInputs& node, NormalizationParams& p) {
  const int64_t rank = node.input_rank(0);
  STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> axes, node.attributes().get_ints("axes", {0, 2, 3}));
  for (int64_t a : axes) {
    STRIDER_ASSIGN_OR_RETURN(int64_t d, axis_of(node, a, rank));
    p.axes.push_back(d);
  }
  std::sort(p.axes.begin(), p.axes.end());
  if (std::adjacent_find(p.axes.begin(), p.axes.end()) != p.axes.end()) return node.error("axes repeat a dim");
  p.epsilon = 1e-9f;
  p.epsilon_after_sqrt = true;
  return Status::ok();
}

// The shape a parameter input must broadcast to (or, GroupNormalization-21, fill).
Shape param_shape(const NormalizationParams& p, const Shape& grouped) {
  Shape shape;
  for (int64_t d : p.param_dims) shape.push_back(grouped[size_t(d)]);
  return shape;
}

Status check_parameter(const InferContext& ctx, const NormalizationParams& p, int input, const Shape& grouped) {
  if (input < 0 || !ctx.has_input(size_t(input))) return Status::ok();
  const Shape& given = ctx.input_shape(size_t(input));
  Shape wanted = param_shape(p, grouped), b;
  if (ctx.input_dtype(size_t(input)) != ctx.input_dtype(0))
    return ctx.error("input {} is {}, X is {}", input, dtype_name(ctx.input_dtype(size_t(input))),
                     dtype_name(ctx.input_dtype(0)));
  if (p.groups > 0 && p.param_dims.size() == 2) {  // [C] filling [G, C / G]
    if (given.size() == 1 && given[0] == wanted[0] * wanted[1]) return Status::ok();
  } else if (broadcast_shapes(given, wanted, &b) && b == wanted) {
    return Status::ok();
  }
  return ctx.error("input {} has shape {}, which does not fit the normalized dims {}", input, shape_to_string(given),
                   shape_to_string(wanted));
}

Status infer_normalization(InferContext& ctx) {
  if (!ctx.has_input(0)) return ctx.error("needs X");
  if (!is_floating(ctx.input_dtype(0))) return ctx.error("X is {}, expected a floating type", dtype_name(ctx.input_dtype(0)));
  STRIDER_ASSIGN_OR_RETURN(NormalizationParams p, resolve_normalization(ctx));
  Shape grouped = normalization_shape(p, ctx.input_shape(0));
  STRIDER_RETURN_IF_ERROR(check_parameter(ctx, p, p.scale_input, grouped));
  STRIDER_RETURN_IF_ERROR(check_parameter(ctx, p, p.bias_input, grouped));
  ctx.set_output(0, ctx.input_dtype(0), ctx.input_shape(0));
  if (p.has_mean_output || p.has_inv_std_output) {
    STRIDER_ASSIGN_OR_RETURN(int64_t stash, ctx.attributes().get_int("stash_type", 1));
    std::optional<DType> stash_dtype = dtype_from_onnx_code(int(stash));
    if (!stash_dtype || !is_floating(*stash_dtype)) return ctx.error("stash_type {} is not a floating type", stash);
    Shape stats = ctx.input_shape(0);
    for (int64_t d : p.axes) stats[size_t(d)] = 1;
    if (p.has_mean_output) ctx.set_output(1, *stash_dtype, stats);
    if (p.has_inv_std_output) ctx.set_output(2, *stash_dtype, stats);
  }
  return Status::ok();
}

}  // namespace

Result<NormalizationParams> resolve_normalization(const NodeInputs& node) {
  NormalizationParams p;
  const std::string& op = node.node().op_type;
  if (op == "LayerNormalization") {
    STRIDER_RETURN_IF_ERROR(resolve_layer_like(node, p, 1e-5f));
    p.bias_input = 2;
    p.has_mean_output = node.has_output(1);
    p.has_inv_std_output = node.has_output(2);
  } else if (op == "RMSNormalization") {
    STRIDER_RETURN_IF_ERROR(resolve_layer_like(node, p, 1e-5f));
    p.subtract_mean = false;
  } else if (op == "InstanceNormalization") {
    if (node.input_rank(0) < 3) return node.error("X must have rank 3 or more, not {}", node.input_rank(0));
    STRIDER_ASSIGN_OR_RETURN(p.epsilon, node.attributes().get_float("epsilon", 1e-5f));
    p.axes = dims_from(2, node.input_rank(0));
    p.param_dims = {1};
    p.scale_input = 1;
    p.bias_input = 2;
  } else if (op == "GroupNormalization") {
    STRIDER_RETURN_IF_ERROR(resolve_group(node, p));
  } else if (op == "MeanVarianceNormalization") {
    STRIDER_RETURN_IF_ERROR(resolve_mvn(node, p));
  } else {
    return internal_error("resolve_normalization of " + op);
  }
  if (p.bias_input >= 0 && !node.has_input(size_t(p.bias_input))) p.bias_input = -1;
  return p;
}

Shape normalization_shape(const NormalizationParams& p, const Shape& x) {
  if (p.groups == 0 || x.size() < 2) return x;
  Shape grouped{x[0], p.groups, x[1] / p.groups};
  grouped.insert(grouped.end(), x.begin() + 2, x.end());
  return grouped;
}

void register_normalization_ops(std::vector<OpSchema>& ops) {
  for (std::string_view op : {"LayerNormalization", "RMSNormalization", "InstanceNormalization", "GroupNormalization",
                              "MeanVarianceNormalization"})
    ops.push_back({op, infer_normalization, {}});
}

}  // namespace strider
