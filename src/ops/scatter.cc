#include "ops/scatter.h"

#include <fmt/format.h>

namespace strider {
namespace {

Result<ScatterReduction> resolve_reduction(const NodeInputs& node) {
  if (node.opset() < 16) return ScatterReduction::kNone;
  STRIDER_ASSIGN_OR_RETURN(std::string name, node.attributes().get_string("reduction", "none"));
  if (name == "none") return ScatterReduction::kNone;
  if (name == "add") return ScatterReduction::kAdd;
  if (name == "mul") return ScatterReduction::kMul;
  if (node.opset() >= 18 && name == "max") return ScatterReduction::kMax;
  if (node.opset() >= 18 && name == "min") return ScatterReduction::kMin;
  return node.error("reduction '{}' is not one of none, add, mul{} at opset {}", name,
                    node.opset() >= 18 ? ", max, min" : "", node.opset());
}

Status require_integer_indices(const NodeInputs& node) {
  DType t = node.input_dtype(1);
  if (t != DType::kI64 && t != DType::kI32) return node.error("indices must be i64 or i32, got {}", dtype_name(t));
  return Status::ok();
}

// Every index of a constant `indices` input within [-dim, dim) of the dim it addresses.
Status check_constant_indices(const NodeInputs& node, const Shape& dims_addressed) {
  const Tensor* indices = node.input_constant(1);
  if (indices == nullptr || dims_addressed.empty()) return Status::ok();
  const size_t k = dims_addressed.size();
  for (int64_t i = 0; i < indices->num_elements(); ++i) {
    const int64_t dim = dims_addressed[size_t(i) % k], v = indices->element_as_int(i);
    if (v < -dim || v >= dim) return node.error("index {} out of range for a dim of size {}", v, dim);
  }
  return Status::ok();
}

Status infer_scatter(InferContext& ctx) {
  const bool elements = ctx.node().op_type == "ScatterElements";
  STRIDER_RETURN_IF_ERROR(
      (elements ? resolve_scatter_elements(ctx) : resolve_scatter_nd(ctx)).status());
  if (ctx.input_dtype(2) != ctx.input_dtype(0))
    return ctx.error("updates are {}, data {}", dtype_name(ctx.input_dtype(2)), dtype_name(ctx.input_dtype(0)));
  ctx.set_output(0, ctx.input_dtype(0), ctx.input_shape(0));
  return Status::ok();
}

Status infer_gather_nd(InferContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(GatherNDParams p, resolve_gather_nd(ctx));
  ctx.set_output(0, ctx.input_dtype(0), gather_nd_output_shape(p, ctx.input_shape(0), ctx.input_shape(1)));
  return Status::ok();
}

}  // namespace

Result<ScatterParams> resolve_scatter_nd(const NodeInputs& node) {
  ScatterParams p;
  STRIDER_ASSIGN_OR_RETURN(p.reduction, resolve_reduction(node));
  STRIDER_RETURN_IF_ERROR(require_integer_indices(node));
  const Shape &data = node.input_shape(0), &indices = node.input_shape(1), &updates = node.input_shape(2);
  if (indices.empty()) return node.error("indices must have rank 1 or more");
  const int64_t k = indices.back();
  if (k < 1 || k > int64_t(data.size()))
    return node.error("indices' last dim {} must be in [1, {}] (data's rank)", k, data.size());
  Shape expected(indices.begin(), indices.end() - 1);
  expected.insert(expected.end(), data.begin() + k, data.end());
  if (updates != expected)
    return node.error("updates are {}, expected {} (indices.shape[:-1] + data.shape[{}:])",
                      shape_to_string(updates), shape_to_string(expected), k);
  STRIDER_RETURN_IF_ERROR(check_constant_indices(node, Shape(data.begin(), data.begin() + k)));
  return p;
}

Result<ScatterParams> resolve_scatter_elements(const NodeInputs& node) {
  ScatterParams p;
  STRIDER_ASSIGN_OR_RETURN(p.reduction, resolve_reduction(node));
  STRIDER_RETURN_IF_ERROR(require_integer_indices(node));
  const Shape &data = node.input_shape(0), &indices = node.input_shape(1), &updates = node.input_shape(2);
  STRIDER_ASSIGN_OR_RETURN(int64_t axis, node.attributes().get_int("axis", 0));
  if (!normalize_axis(axis, int64_t(data.size()), &p.axis))
    return node.error("axis {} out of range for rank {}", axis, data.size());
  if (indices != updates) return node.error("indices {} and updates {} differ", shape_to_string(indices), shape_to_string(updates));
  if (indices.size() != data.size()) return node.error("indices have rank {}, data {}", indices.size(), data.size());
  for (size_t d = 0; d < data.size(); ++d)
    if (int64_t(d) != p.axis && indices[d] > data[d])
      return node.error("indices {} do not fit data {} on axis {}", shape_to_string(indices), shape_to_string(data), d);
  if (const Tensor* constant = node.input_constant(1)) {
    const int64_t dim = data[size_t(p.axis)];
    for (int64_t i = 0; i < constant->num_elements(); ++i)
      if (int64_t v = constant->element_as_int(i); v < -dim || v >= dim)
        return node.error("index {} out of range for axis {} of size {}", v, p.axis, dim);
  }
  return p;
}

Result<GatherNDParams> resolve_gather_nd(const NodeInputs& node) {
  GatherNDParams p;
  STRIDER_ASSIGN_OR_RETURN(p.batch_dims, node.attributes().get_int("batch_dims", 0));
  STRIDER_RETURN_IF_ERROR(require_integer_indices(node));
  const Shape &data = node.input_shape(0), &indices = node.input_shape(1);
  const int64_t b = p.batch_dims;
  if (indices.empty()) return node.error("indices must have rank 1 or more");
  if (b < 0 || b >= int64_t(std::min(data.size(), indices.size())))
    return node.error("batch_dims {} must be below both ranks ({}, {})", b, data.size(), indices.size());
  for (int64_t d = 0; d < b; ++d)
    if (data[size_t(d)] != indices[size_t(d)])
      return node.error("batch dim {} differs: data {}, indices {}", d, data[size_t(d)], indices[size_t(d)]);
  p.k = indices.back();
  if (p.k < 1 || b + p.k > int64_t(data.size()))
    return node.error("indices' last dim {} must be in [1, {}]", p.k, int64_t(data.size()) - b);
  STRIDER_RETURN_IF_ERROR(check_constant_indices(node, Shape(data.begin() + b, data.begin() + b + p.k)));
  return p;
}

Shape gather_nd_output_shape(const GatherNDParams& p, const Shape& data, const Shape& indices) {
  Shape shape(indices.begin(), indices.end() - 1);
  shape.insert(shape.end(), data.begin() + p.batch_dims + p.k, data.end());
  return shape;
}

void register_scatter_ops(std::vector<OpSchema>& ops) {
  ops.push_back({"ScatterND", infer_scatter, {}});
  ops.push_back({"ScatterElements", infer_scatter, {}});
  ops.push_back({"GatherND", infer_gather_nd, {}});
}

}  // namespace strider
