#include "ops/conv_chain.h"

#include <fmt/format.h>

#include "ops/fused_elementwise.h"
#include "ops/shape_ops.h"

namespace strider {
namespace {

constexpr std::string_view kPointwisePrefix = "pointwise.", kDepthwisePrefix = "depthwise.";

void copy_prefixed(const Node& part, std::string_view prefix, Node* chain) {
  chain->attributes.set_string(std::string(prefix) + "op_type", part.op_type);
  chain->attributes.set_string(std::string(prefix) + "name", part.name);
  for (const auto& [name, value] : part.attributes.all()) chain->attributes.set(std::string(prefix) + name, value);
}

// The part whose attributes carry `prefix`, as a Conv or FusedConv node.
Result<Node> part_of_chain(const Node& chain, std::string_view prefix) {
  Node part;
  part.opset = chain.opset;
  for (const auto& [name, value] : chain.attributes.all())
    if (name.starts_with(prefix)) part.attributes.set(name.substr(prefix.size()), value);
  STRIDER_ASSIGN_OR_RETURN(part.op_type, part.attributes.get_string("op_type", ""));
  STRIDER_ASSIGN_OR_RETURN(part.name, part.attributes.get_string("name", chain.name));
  if (part.op_type == kFusedConvOp) {
    part.domain = std::string(kStriderDomain);
  } else if (part.op_type != "Conv") {
    return invalid_model(fmt::format("{}: its {}op_type is '{}', not Conv or FusedConv", describe_node(chain), prefix,
                                     part.op_type));
  }
  return part;
}

// FusedPointwiseDepthwise's output: the depthwise convolution's of the pointwise one's.
// Each part is checked as its own op would be, and as the fusion made it (a pointwise
// part, a depthwise part, programs that read nothing but the convolution).
Status infer_conv_chain(InferContext& ctx) {
  if (ctx.num_inputs() != 5 || ctx.num_outputs() != 1)
    return ctx.error("FusedPointwiseDepthwise takes X, W1, B1, W2, B2 and gives one output");
  Result<ConvChainParts> parts = split_conv_chain(ctx.node());
  if (!parts.is_ok()) return parts.status();
  for (const Node* part : {&parts->pointwise, &parts->depthwise})
    if (part->op_type == kFusedConvOp) STRIDER_RETURN_IF_ERROR(read_fused_program_of(*part, 1).status());
  const Shape &x = ctx.input_shape(0), &w1 = ctx.input_shape(1), &w2 = ctx.input_shape(3);
  if (x.size() != 4 || w1.size() != 4 || w2.size() != 4) return ctx.error("X, W1 and W2 must have rank 4");
  const DType dtype = ctx.input_dtype(0);
  if (!is_floating(dtype)) return ctx.error("X must be a float tensor, not {}", dtype_name(dtype));
  for (size_t i = 1; i < 5; ++i)
    if (ctx.has_input(i) && ctx.input_dtype(i) != dtype) return ctx.error("input {} is not {}", i, dtype_name(dtype));
  if (w1[2] != 1 || w1[3] != 1) return ctx.error("the pointwise weights {} are not 1x1", shape_to_string(w1));
  STRIDER_ASSIGN_OR_RETURN(int64_t group, parts->pointwise.attributes.get_int("group", 1));
  if (group != 1) return ctx.error("the pointwise part has {} groups", group);
  STRIDER_ASSIGN_OR_RETURN(Shape mid, conv_output_shape(NodeInputs(ctx.graph(), parts->pointwise), x, w1));
  if (mid[2] != x[2] || mid[3] != x[3]) return ctx.error("the pointwise part changes the image size");
  STRIDER_ASSIGN_OR_RETURN(group, parts->depthwise.attributes.get_int("group", 1));
  if (group != mid[1] || w2[0] != mid[1] || w2[1] != 1)
    return ctx.error("the depthwise part ({} groups, weights {}) is not one group per channel of {}", group,
                     shape_to_string(w2), shape_to_string(mid));
  STRIDER_ASSIGN_OR_RETURN(Shape out, conv_output_shape(NodeInputs(ctx.graph(), parts->depthwise), mid, w2));
  if (ctx.has_input(2) && ctx.input_shape(2) != Shape{mid[1]}) return ctx.error("B1 is not [{}]", mid[1]);
  if (ctx.has_input(4) && ctx.input_shape(4) != Shape{out[1]}) return ctx.error("B2 is not [{}]", out[1]);
  ctx.set_output(0, dtype, out);
  return Status::ok();
}

}  // namespace

Result<ConvChainParts> split_conv_chain(const Node& chain) {
  ConvChainParts parts;
  STRIDER_ASSIGN_OR_RETURN(parts.pointwise, part_of_chain(chain, kPointwisePrefix));
  STRIDER_ASSIGN_OR_RETURN(parts.depthwise, part_of_chain(chain, kDepthwisePrefix));
  parts.pointwise.inputs = {chain.input(0), chain.input(1), chain.input(2)};
  parts.pointwise.outputs = {kNoValue};
  parts.depthwise.inputs = {kNoValue, chain.input(3), chain.input(4)};
  parts.depthwise.outputs = chain.outputs;
  return parts;
}

Node make_conv_chain(const Node& pointwise, const Node& depthwise) {
  Node chain;
  chain.name = depthwise.name;
  chain.op_type = std::string(kFusedPointwiseDepthwiseOp);
  chain.domain = std::string(kStriderDomain);
  chain.opset = depthwise.opset;
  chain.inputs = {pointwise.input(0), pointwise.input(1), pointwise.input(2), depthwise.input(1), depthwise.input(2)};
  chain.outputs = depthwise.outputs;
  copy_prefixed(pointwise, kPointwisePrefix, &chain);
  copy_prefixed(depthwise, kDepthwisePrefix, &chain);
  return chain;
}

OpSchema conv_chain_schema() { return {kFusedPointwiseDepthwiseOp, infer_conv_chain, {}, {}, {}}; }

}  // namespace strider
