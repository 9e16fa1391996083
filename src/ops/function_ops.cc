#include "ops/function_ops.h"

namespace strider {
namespace {

Status infer_same_as_input(InferContext& ctx) {
  ctx.set_output(0, ctx.input_dtype(0), ctx.input_shape(0));
  return Status::ok();
}

Status infer_rotary_embedding(InferContext& ctx) {
  STRIDER_RETURN_IF_ERROR(resolve_rotary_embedding(ctx).status());
  return infer_same_as_input(ctx);
}

Status infer_lp_normalization(InferContext& ctx) {
  STRIDER_RETURN_IF_ERROR(resolve_lp_normalization(ctx).status());
  return infer_same_as_input(ctx);
}

Status infer_one_hot(InferContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(OneHotParams p, resolve_one_hot(ctx));
  Shape shape = ctx.input_shape(0);
  shape.insert(shape.begin() + p.axis, p.depth);
  ctx.set_output(0, ctx.input_dtype(2), std::move(shape));
  return Status::ok();
}

}  // namespace

Result<RotaryParams> resolve_rotary_embedding(const NodeInputs& node) {
  RotaryParams p;
  const Shape& x = node.input_shape(0);
  if (!is_floating(node.input_dtype(0))) return node.error("input is {}, expected a floating type", dtype_name(node.input_dtype(0)));
  if (x.size() != 3 && x.size() != 4) return node.error("input {} must be 3-D or 4-D", shape_to_string(x));
  p.three_d = x.size() == 3;
  STRIDER_ASSIGN_OR_RETURN(int64_t interleaved, node.attributes().get_int("interleaved", 0));
  STRIDER_ASSIGN_OR_RETURN(int64_t heads, node.attributes().get_int("num_heads", 0));
  STRIDER_ASSIGN_OR_RETURN(p.rotary, node.attributes().get_int("rotary_embedding_dim", 0));
  p.interleaved = interleaved != 0;
  p.batch = x[0];
  if (p.three_d) {
    if (heads < 1 || x[2] % heads) return node.error("hidden size {} does not split into num_heads {}", x[2], heads);
    p.heads = heads;
    p.len = x[1];
    p.head = x[2] / heads;
  } else {
    p.heads = x[1];
    p.len = x[2];
    p.head = x[3];
  }
  if (p.rotary == 0) p.rotary = p.head;
  if (p.rotary < 2 || p.rotary > p.head || p.rotary % 2)
    return node.error("rotary_embedding_dim {} must be even and at most the head size {}", p.rotary, p.head);
  p.has_positions = node.has_input(3);
  const Shape& cos = node.input_shape(1);
  const Shape expected = p.has_positions ? Shape{cos.empty() ? 0 : cos[0], p.rotary / 2} : Shape{p.batch, p.len, p.rotary / 2};
  if (cos != expected || node.input_shape(2) != cos)
    return node.error("cos and sin caches are {} and {}, expected {}", shape_to_string(cos), shape_to_string(node.input_shape(2)),
                      shape_to_string(expected));
  if (p.has_positions && node.input_shape(3) != Shape{p.batch, p.len})
    return node.error("position_ids are {}, expected [{}, {}]", shape_to_string(node.input_shape(3)), p.batch, p.len);
  return p;
}

Result<LpNormParams> resolve_lp_normalization(const NodeInputs& node) {
  LpNormParams p;
  STRIDER_ASSIGN_OR_RETURN(int64_t axis, node.attributes().get_int("axis", -1));
  STRIDER_ASSIGN_OR_RETURN(p.p, node.attributes().get_int("p", 2));
  if (!normalize_axis(axis, node.input_rank(0), &p.axis)) return node.error("axis {} out of range", axis);
  if (p.p != 1 && p.p != 2) return node.error("p {} is not 1 or 2", p.p);
  if (!is_floating(node.input_dtype(0))) return node.error("input must be floating");
  return p;
}

Result<OneHotParams> resolve_one_hot(const NodeInputs& node) {
  OneHotParams p;
  STRIDER_ASSIGN_OR_RETURN(std::vector<double> depth, node.constant_floats(1, "depth"));
  if (depth.size() != 1 || !(depth[0] >= 1) || depth[0] > double(int64_t(1) << 40))
    return node.error("depth must be one positive number");
  p.depth = int64_t(depth[0]);
  if (node.input_shape(2) != Shape{2}) return node.error("values must have 2 elements, [off, on]");
  if (node.input_dtype(0) == DType::kBool) return node.error("indices must be numeric");
  STRIDER_ASSIGN_OR_RETURN(int64_t axis, node.attributes().get_int("axis", -1));
  if (!normalize_axis(axis, node.input_rank(0) + 1, &p.axis)) return node.error("axis {} out of range", axis);
  return p;
}

void register_function_ops(std::vector<OpSchema>& ops) {
  ops.push_back({"RotaryEmbedding", infer_rotary_embedding, {}});
  ops.push_back({"LpNormalization", infer_lp_normalization, {}});
  ops.push_back({"OneHot", infer_one_hot, {}, {1}});
}

}  // namespace strider
