// The program of a fused node (FusedMatMul, FusedConv: ops/fused_elementwise.h) on CUDA,
// after the product that feeds it. A library kernel (cuBLASLt, cuDNN) adds a bias row and
// an addend (a residual) in its own epilogue, so a program made only of those adds costs
// no pass over memory; any other program runs as one map launch over the product's output
// in place (register 0 is the output itself, read and written by the same element's
// thread), which costs what the unfused FusedElementwise cost and keeps its compiled forms.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hal/cuda/cuda_kernels.h"
#include "hal/cuda/launch.h"
#include "ops/fused_elementwise.h"

namespace strider::cuda {

// The program's instructions as map parameters (the compiled form picked by its text).
MapParams fused_map_params(const FusedProgram& program);

// An order of the program's input registers under which its text is one of the compiled
// forms (kFusedFormTexts, launch.h): order[k] is the register that becomes register k.
// The fusion passes number operands as they meet them, so a FusedMatMul's program (the
// product first) reads GPT-2's bias and product in the other order than the form's text.
std::optional<std::vector<int>> compiled_form_order(const FusedProgram& program);
// The program with its inputs renamed by such an order.
FusedProgram with_operand_order(const FusedProgram& program, const std::vector<int>& order);

// A program that is register 0 plus operands, one Add at a time ("Add(Add(x0, x1), x2)",
// either operand order): the operand registers in the order they are added (one or two,
// each an input register >= 1, distinct). nullopt for any other program.
std::optional<std::vector<int>> as_added_operands(const FusedProgram& program);

// The program as an activation strider's own convolutions apply (launch.h): Relu,
// Clip(low, high), Sigmoid, Tanh of register 0, or SiLU as x * Sigmoid(x) either way round.
std::optional<ConvEpilogue> conv_epilogue_of(const FusedProgram& program);

// The operand as a bias row of `out`: broadcast to out's sizes it varies along the last
// dim only, densely (stride 1), over all of it.
bool is_bias_row(const TensorView& operand, const TensorView& out);
// The operand, broadcast to out's sizes, has out's strides on every dim of size above 1:
// a library kernel may read it as its C with D's layout.
bool has_layout_of(const TensorView& operand, const TensorView& out);

// `product` (which wrote `out`), then out = program(out, operands...) as one map launch.
// `operands` are the views of registers 1.. in order.
Result<std::unique_ptr<Kernel>> then_program(std::unique_ptr<Kernel> product, const FusedProgram& program,
                                             const TensorView& out, const std::vector<TensorView>& operands);
// The same with every register's view given (each of out's sizes): `out` need not be one
// of them (a FusedGatedConv's gate reads two halves of a buffer and writes its output).
Result<std::unique_ptr<Kernel>> then_program_over(std::unique_ptr<Kernel> product, const FusedProgram& program,
                                                  const TensorView& out, std::vector<TensorView> registers);

}  // namespace strider::cuda
