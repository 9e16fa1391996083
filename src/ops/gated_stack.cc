#include "ops/gated_stack.h"

#include <fmt/format.h>

#include "ops/shape_ops.h"

namespace strider {
namespace {

// X [N, C, spatial...] and each unit's W [2C, C, 1...] and B [2C], one float dtype.
Status infer_gated_stack(InferContext& ctx) {
  if (ctx.num_outputs() != 1 || ctx.num_inputs() < 3 || ctx.num_inputs() % 2 != 1)
    return ctx.error("FusedGatedStack takes X, then W and B for each unit, and gives one output");
  const Shape& x = ctx.input_shape(0);
  const DType dtype = ctx.input_dtype(0);
  if (x.size() < 3) return ctx.error("X {} has no spatial axis", shape_to_string(x));
  if (!is_floating(dtype)) return ctx.error("X must be a float tensor, not {}", dtype_name(dtype));
  const int64_t c = x[1];
  for (size_t unit = 0; 2 * unit + 1 < ctx.num_inputs(); ++unit) {
    const size_t w = 2 * unit + 1, b = w + 1;
    const Shape& ws = ctx.input_shape(w);
    bool one_tap = ws.size() == x.size() && ws[0] == 2 * c && ws[1] == c;
    for (size_t d = 2; one_tap && d < ws.size(); ++d) one_tap = ws[d] == 1;
    if (!ctx.has_input(w) || !one_tap)
      return ctx.error("unit {}'s weights {} are not [{}, {}, 1...] for X {}", unit, shape_to_string(ws), 2 * c, c,
                       shape_to_string(x));
    if (ctx.input_dtype(w) != dtype) return ctx.error("unit {}'s weights are not {}", unit, dtype_name(dtype));
    if (ctx.has_input(b) && (ctx.input_shape(b) != Shape{2 * c} || ctx.input_dtype(b) != dtype))
      return ctx.error("unit {}'s bias is {} {}, not {} [{}]", unit, dtype_name(ctx.input_dtype(b)),
                       shape_to_string(ctx.input_shape(b)), dtype_name(dtype), 2 * c);
  }
  ctx.set_output(0, dtype, x);
  return Status::ok();
}

}  // namespace

int64_t gated_stack_units(const Node& stack) { return int64_t(stack.inputs.size() - 1) / 2; }

Node make_gated_stack(const std::vector<const Node*>& units) {
  const Node& last = *units.back();
  Node stack;
  stack.name = last.name;
  stack.op_type = std::string(kFusedGatedStackOp);
  stack.domain = std::string(kStriderDomain);
  stack.opset = last.opset;
  stack.inputs = {units.front()->input(0)};
  std::string names;
  for (const Node* unit : units) {
    stack.inputs.push_back(unit->input(1));
    stack.inputs.push_back(unit->input(2));
    Result<std::string> folded = unit->attributes.get_string("nodes", unit->name);
    names += (names.empty() ? "" : ",") + (folded.is_ok() ? *folded : unit->name);
  }
  stack.outputs = last.outputs;
  stack.attributes.set_string("nodes", names);
  return stack;
}

OpSchema gated_stack_schema() { return {kFusedGatedStackOp, infer_gated_stack, {}, {}, {}}; }

}  // namespace strider
