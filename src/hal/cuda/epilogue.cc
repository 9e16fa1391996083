#include "hal/cuda/epilogue.h"

#include <fmt/format.h>

#include <algorithm>

namespace strider::cuda {

std::optional<std::vector<int>> compiled_form_order(const FusedProgram& program) {
  const int n = program.inputs;
  if (n > 6) return std::nullopt;  // 720 orders at most, tried once at kernel creation
  const std::string text = describe_fused_program(program);
  std::vector<int> order(static_cast<size_t>(n));
  for (int k = 0; k < n; ++k) order[size_t(k)] = k;
  for (const FusedFormText& known : kFusedFormTexts) {
    if (text == known.expression) return order;
    if (text.size() != std::string_view(known.expression).size()) continue;  // renaming keeps the length
    do {
      if (describe_fused_program(with_operand_order(program, order)) == known.expression) return order;
    } while (std::next_permutation(order.begin(), order.end()));
  }
  return std::nullopt;
}

FusedProgram with_operand_order(const FusedProgram& program, const std::vector<int>& order) {
  std::vector<int> renamed(order.size());
  for (size_t k = 0; k < order.size(); ++k) renamed[size_t(order[k])] = int(k);
  FusedProgram out = program;
  auto rename = [&](int r) { return r >= 0 && r < program.inputs ? renamed[size_t(r)] : r; };
  for (FusedInstruction& i : out.code) {
    i.a = rename(i.a);
    i.b = rename(i.b);
  }
  return out;
}

MapParams fused_map_params(const FusedProgram& program) {
  MapParams params;
  params.fused.count = int(program.code.size());
  for (size_t j = 0; j < program.code.size(); ++j) {
    const FusedInstruction& i = program.code[j];
    params.fused.op[j] = uint8_t(i.op);
    params.fused.a[j] = int8_t(i.a);
    params.fused.b[j] = int8_t(i.b);
    params.fused.alpha[j] = i.alpha;
    params.fused.beta[j] = i.beta;
  }
  const std::string expression = describe_fused_program(program);
  for (const FusedFormText& known : kFusedFormTexts)
    if (expression == known.expression) params.fused.form = known.form;
  return params;
}

std::optional<std::vector<int>> as_added_operands(const FusedProgram& program) {
  if (program.code.empty() || program.code.size() > 2) return std::nullopt;
  std::vector<int> added;
  int sum = 0;  // the register holding register 0 plus what was added so far
  for (size_t j = 0; j < program.code.size(); ++j) {
    const FusedInstruction& i = program.code[j];
    if (i.op != FusedOp::kAdd) return std::nullopt;
    const int other = i.a == sum ? i.b : i.b == sum ? i.a : -1;
    if (other < 1 || other >= program.inputs || std::count(added.begin(), added.end(), other)) return std::nullopt;
    added.push_back(other);
    sum = program.inputs + int(j);
  }
  return added;
}

std::optional<ConvEpilogue> conv_epilogue_of(const FusedProgram& program) {
  if (program.inputs != 1 || program.code.empty() || program.code[0].a != 0 || program.code[0].b >= 0)
    return std::nullopt;
  const FusedInstruction& first = program.code[0];
  if (program.code.size() == 1) {
    switch (first.op) {
      case FusedOp::kRelu: return ConvEpilogue{ConvActivation::kRelu};
      case FusedOp::kClip: return ConvEpilogue{ConvActivation::kClip, first.alpha, first.beta};
      case FusedOp::kSigmoid: return ConvEpilogue{ConvActivation::kSigmoid};
      case FusedOp::kTanh: return ConvEpilogue{ConvActivation::kTanh};
      default: return std::nullopt;
    }
  }
  const FusedInstruction& second = program.code[1];
  const bool silu = program.code.size() == 2 && first.op == FusedOp::kSigmoid && second.op == FusedOp::kMul &&
                    ((second.a == 0 && second.b == 1) || (second.a == 1 && second.b == 0));
  if (silu) return ConvEpilogue{ConvActivation::kSilu};
  return std::nullopt;
}

bool is_bias_row(const TensorView& operand, const TensorView& out) {
  Result<TensorView> b = broadcast_view(operand, out.sizes);
  if (!b.is_ok() || out.rank() == 0) return false;
  const size_t last = size_t(out.rank()) - 1;
  for (size_t d = 0; d < last; ++d)
    if (b->strides[d] != 0 && b->sizes[d] > 1) return false;
  return b->strides[last] == 1 || b->sizes[last] == 1;
}

bool has_layout_of(const TensorView& operand, const TensorView& out) {
  Result<TensorView> b = broadcast_view(operand, out.sizes);
  if (!b.is_ok()) return false;
  for (size_t d = 0; d < size_t(out.rank()); ++d)
    if (out.sizes[d] > 1 && b->strides[d] != out.strides[d]) return false;
  return true;
}

namespace {

class ThenProgram final : public Kernel {
 public:
  ThenProgram(std::unique_ptr<Kernel> product, MapLaunch program, std::string expression)
      : product_(std::move(product)), program_(program), expression_(std::move(expression)) {}
  Status run(const QueueContext& queue) override {
    STRIDER_RETURN_IF_ERROR(product_->run(queue));
    return run_map(program_, stream_of(queue));
  }
  std::string implementation() const override {
    return product_->implementation() + " then strider-cuda:fused " + map_mode_name(program_) + " " + expression_;
  }
  Status check_completed() override { return product_->check_completed(); }

 private:
  std::unique_ptr<Kernel> product_;
  MapLaunch program_;
  std::string expression_;
};

}  // namespace

Result<std::unique_ptr<Kernel>> then_program(std::unique_ptr<Kernel> product, const FusedProgram& program,
                                             const TensorView& out, const std::vector<TensorView>& operands) {
  if (operands.size() + 1 != size_t(program.inputs)) return internal_error("fused program and operands disagree");
  std::vector<TensorView> registers = {out};
  for (const TensorView& operand : operands) {
    STRIDER_ASSIGN_OR_RETURN(TensorView b, broadcast_view(operand, out.sizes));
    registers.push_back(std::move(b));
  }
  return then_program_over(std::move(product), program, out, std::move(registers));
}

Result<std::unique_ptr<Kernel>> then_program_over(std::unique_ptr<Kernel> product, const FusedProgram& program,
                                                  const TensorView& out, std::vector<TensorView> registers) {
  if (registers.size() != size_t(program.inputs)) return internal_error("fused program and registers disagree");
  // One instruction (a Clip, a residual Add) runs as that op's own map: the interpreter
  // took 0.11 ms for a ReLU6 that the Clip kernel does in 0.07 (MobileNetV2, bf16, b32).
  if (program.code.size() == 1) {
    const FusedInstruction& i = program.code[0];
    MapSpec spec{i.op == FusedOp::kClip ? MapOp::kClip : MapOp::kElementwise, out, {registers[size_t(i.a)]}, {}};
    if (i.b >= 0) spec.inputs.push_back(registers[size_t(i.b)]);
    spec.params.elementwise = i.op;
    spec.params.scalars[0] = i.alpha;  // the row's alpha and beta; Clip's bounds
    spec.params.scalars[1] = i.beta;
    MapLaunch launch;
    STRIDER_RETURN_IF_ERROR(prepare_map(spec, &launch));
    return std::unique_ptr<Kernel>(new ThenProgram(std::move(product), launch, describe_fused_program(program)));
  }
  // The product's result is register 0 here; a compiled form may want it elsewhere.
  FusedProgram ordered = program;
  if (std::optional<std::vector<int>> order = compiled_form_order(program)) {
    ordered = with_operand_order(program, *order);
    std::vector<TensorView> reordered;
    for (int r : *order) reordered.push_back(registers[size_t(r)]);
    registers = std::move(reordered);
  }
  MapSpec spec{MapOp::kFused, out, std::move(registers), fused_map_params(ordered)};
  const MapParams params = spec.params;
  MapLaunch launch;
  STRIDER_RETURN_IF_ERROR(prepare_map(spec, &launch));
  std::string expression = describe_fused_program(ordered);
  if (params.fused.form != FusedForm::kNone) expression += " (compiled form)";
  return std::unique_ptr<Kernel>(new ThenProgram(std::move(product), launch, std::move(expression)));
}

}  // namespace strider::cuda
