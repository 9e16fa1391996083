// FusedElementwise: the program's encoding on the node, its validation and its shape
// function (registered in op_registry.cc under the strider domain).
#include "ops/fused_elementwise.h"

#include <fmt/format.h>

#include "base/shape.h"
#include "ops/elementwise_params.h"
#include "ops/op_registry.h"

namespace strider {

std::string_view fused_op_name(FusedOp op) { return elementwise_op_name(op); }

int fused_op_arity(FusedOp op) { return elementwise_arity(elementwise_kind(op)); }

int64_t positions_per_channel(const Shape& shape) {
  if (shape.size() < 2) return 0;
  int64_t positions = shape[0];
  for (size_t d = 2; d < shape.size(); ++d) positions *= shape[d];
  return positions;
}

bool fused_op_from_onnx(std::string_view op_type, FusedOp* op) {
  std::optional<ElementwiseOp> found = elementwise_op_from_onnx(op_type);
  if (!found || !elementwise_fusable(elementwise_kind(*found))) return false;
  *op = *found;
  return true;
}

namespace {

// Register r spelled out; `limit` bounds what it may read (a malformed program, with
// registers read before they are defined, still prints, with "?" for them).
std::string describe_register(const FusedProgram& p, int r, int limit) {
  if (r < 0 || r >= limit) return "?";
  if (r < p.inputs) return fmt::format("x{}", r);
  const FusedInstruction& i = p.code[size_t(r - p.inputs)];
  std::string text = fmt::format("{}({}", fused_op_name(i.op), describe_register(p, i.a, r));
  if (i.b >= 0) text += ", " + describe_register(p, i.b, r);
  if (i.op == FusedOp::kHardSigmoid || i.op == FusedOp::kClip) text += fmt::format(", {}, {}", i.alpha, i.beta);
  else if (i.beta != 0) text += fmt::format(", alpha={}, beta={}", i.alpha, i.beta);
  else if (i.alpha != 0) text += fmt::format(", alpha={}", i.alpha);
  return text + ")";
}

Status check_instruction(const FusedProgram& p, size_t j) {
  const FusedInstruction& i = p.code[j];
  const int defined = p.inputs + int(j);
  if (i.a < 0 || i.a >= defined) return invalid_model(fmt::format("instruction {} reads register {}", j, i.a));
  if (fused_op_arity(i.op) == 2 && (i.b < 0 || i.b >= defined))
    return invalid_model(fmt::format("instruction {} ({}) reads register {}", j, fused_op_name(i.op), i.b));
  if (fused_op_arity(i.op) == 1 && i.b != -1)
    return invalid_model(fmt::format("instruction {} ({}) has a second operand", j, fused_op_name(i.op)));
  return Status::ok();
}

Status infer_fused_elementwise(InferContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(FusedProgram program, read_fused_program(ctx.node()));
  if (ctx.num_inputs() != size_t(program.inputs)) return ctx.error("program reads {} inputs", program.inputs);
  Shape shape = ctx.input_shape(0);
  for (size_t i = 1; i < ctx.num_inputs(); ++i) {
    Shape next;
    if (!broadcast_shapes(shape, ctx.input_shape(i), &next))
      return ctx.error("input shapes {} and {} do not broadcast", shape_to_string(shape),
                       shape_to_string(ctx.input_shape(i)));
    shape = std::move(next);
    if (ctx.input_dtype(i) != ctx.input_dtype(0)) return ctx.error("inputs have different dtypes");
  }
  ctx.set_output(0, ctx.input_dtype(0), std::move(shape));
  return Status::ok();
}

}  // namespace

std::string describe_fused_program(const FusedProgram& program) {
  if (program.code.empty()) return "x0";
  const int last = program.inputs + int(program.code.size()) - 1;
  return describe_register(program, last, last + 1);
}

void write_fused_program(const FusedProgram& program, Node* node) {
  std::vector<int64_t> ops, operands;
  std::vector<float> alphas, betas;
  for (const FusedInstruction& i : program.code) {
    ops.push_back(int64_t(i.op));
    operands.push_back(i.a);
    operands.push_back(i.b);
    alphas.push_back(i.alpha);
    betas.push_back(i.beta);
  }
  node->attributes.set_ints("ops", std::move(ops));
  node->attributes.set_ints("operands", std::move(operands));
  node->attributes.set_floats("alphas", std::move(alphas));
  node->attributes.set_floats("betas", std::move(betas));
  node->attributes.set_string("expression", describe_fused_program(program));
}

Result<FusedProgram> read_fused_program(const Node& node) { return read_fused_program_of(node, int(node.inputs.size())); }

Result<FusedProgram> read_fused_program_of(const Node& node, int inputs) {
  STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> ops, node.attributes.require_ints("ops"));
  STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> operands, node.attributes.require_ints("operands"));
  STRIDER_ASSIGN_OR_RETURN(std::vector<float> alphas, node.attributes.get_floats("alphas", {}));
  STRIDER_ASSIGN_OR_RETURN(std::vector<float> betas, node.attributes.get_floats("betas", {}));
  const size_t n = ops.size();
  if (n == 0 || n > size_t(kMaxFusedInstructions) || operands.size() != 2 * n || alphas.size() != n ||
      betas.size() != n)
    return invalid_model(fmt::format("node '{}': malformed fused program ({} instructions)", node.name, n));
  FusedProgram program;
  program.inputs = inputs;
  if (program.inputs < 1 || program.inputs > kMaxFusedInputs)
    return invalid_model(fmt::format("node '{}': a fused program reads 1 to {} inputs", node.name, kMaxFusedInputs));
  for (size_t j = 0; j < n; ++j) {
    if (ops[j] < 0 || ops[j] >= kElementwiseOpCount || !elementwise_fusable(elementwise_kind(FusedOp(ops[j]))))
      return invalid_model(fmt::format("node '{}': unknown fused op code {}", node.name, ops[j]));
    program.code.push_back({FusedOp(ops[j]), int(operands[2 * j]), int(operands[2 * j + 1]), alphas[j], betas[j]});
    Status valid = check_instruction(program, j);
    if (!valid.is_ok()) return invalid_model(fmt::format("node '{}': {}", node.name, valid.message()));
  }
  return program;
}

namespace {
// Every epilogue operand (inputs from `first` on) must broadcast to the output.
Status check_epilogue_operands(InferContext& ctx, size_t first) {
  const Shape out = ctx.output_shape(0);
  for (size_t i = first; i < ctx.num_inputs(); ++i) {
    Shape joined;
    if (!broadcast_shapes(ctx.input_shape(i), out, &joined) || joined != out)
      return ctx.error("epilogue operand {} {} does not broadcast to {}", i, shape_to_string(ctx.input_shape(i)),
                       shape_to_string(out));
  }
  return Status::ok();
}

// FusedConv's output is its Conv's: the program keeps the shape; its operands are the
// inputs after X, W and B.
Status infer_fused_conv(InferContext& ctx) {
  const size_t extra = ctx.num_inputs() > 3 ? ctx.num_inputs() - 3 : 0;
  STRIDER_RETURN_IF_ERROR(read_fused_program_of(ctx.node(), 1 + int(extra)).status());
  STRIDER_RETURN_IF_ERROR(find_op_schema("", "Conv")->infer(ctx));
  return check_epilogue_operands(ctx, 3);
}
}  // namespace

OpSchema fused_conv_schema() { return {kFusedConvOp, infer_fused_conv, {}, {}, {}}; }

namespace {
// FusedGatedConv's output is its Conv's with half the channels.
Status infer_fused_gated_conv(InferContext& ctx) {
  const size_t extra = ctx.num_inputs() > 3 ? ctx.num_inputs() - 3 : 0;
  STRIDER_RETURN_IF_ERROR(read_fused_program_of(ctx.node(), 2 + int(extra)).status());
  STRIDER_RETURN_IF_ERROR(find_op_schema("", "Conv")->infer(ctx));
  Shape out = ctx.output_shape(0);
  if (out.size() < 2 || out[1] % 2 != 0)
    return ctx.error("a gated convolution needs an even number of output channels, not {}", shape_to_string(out));
  out[1] /= 2;
  ctx.set_output(0, ctx.input_dtype(0), out);
  return check_epilogue_operands(ctx, 3);
}
}  // namespace

OpSchema fused_gated_conv_schema() { return {kFusedGatedConvOp, infer_fused_gated_conv, {}, {}, {}}; }

namespace {
// FusedMatMul's output is its MatMul's; every epilogue operand must broadcast to it.
Status infer_fused_matmul(InferContext& ctx) {
  const Node& node = ctx.node();
  if (node.inputs.size() < 2) return ctx.error("FusedMatMul needs A and B");
  STRIDER_RETURN_IF_ERROR(read_fused_program_of(node, int(node.inputs.size()) - 1).status());
  STRIDER_RETURN_IF_ERROR(find_op_schema("", "MatMul")->infer(ctx));
  return check_epilogue_operands(ctx, 2);
}
}  // namespace

OpSchema fused_matmul_schema() { return {kFusedMatMulOp, infer_fused_matmul, {}, {}, {}}; }

OpSchema fused_elementwise_schema() {
  return {kFusedElementwiseOp, infer_fused_elementwise, {}, {}, {.in_place = true}};
}

}  // namespace strider
