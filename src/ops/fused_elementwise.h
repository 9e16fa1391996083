// FusedElementwise (domain "strider"): a chain or tree of elementwise ops that the fusion
// pass (passes/fuse_elementwise.h) folded into one node, so the intermediate values are
// never stored: SiLU's Sigmoid and Mul, a gated unit's tanh(a) * sigmoid(b) + h.
//
// The node's inputs are the operands the group read from outside; each is broadcast to the
// output's shape (every fused op's output had that shape). The program is a list of
// instructions over numbered registers: registers 0 .. inputs-1 hold the node's inputs,
// register inputs + j holds instruction j's result, and the last instruction's result is
// the output. Arithmetic is f32 for f32, bf16 and f16 storage (ops/elementwise_math.h).
//
// On the node the program is four attributes of equal length per instruction: `ops`
// (FusedOp codes), `operands` (two register numbers per instruction, -1 for none),
// `alphas`, `betas`; `expression` spells it out for `strider inspect` and errors.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ir/graph.h"
#include "ops/elementwise_math.h"
#include "strider/status.h"

namespace strider {

inline constexpr std::string_view kFusedElementwiseOp = "FusedElementwise";
// A Conv whose output goes through a program (its activation: SiLU, Relu, Clip; a residual
// add) before anything reads it: the Conv's attributes and inputs X, W, B (absent when the
// Conv had none and the program has operands), then the program's other operands;
// register 0 is the convolution's result, register k >= 1 is input k + 2.
inline constexpr std::string_view kFusedConvOp = "FusedConv";
// A Conv whose 2K output channels are the two gates of one unit: a program reads channels
// [0, K) as register 0 and [K, 2K) as register 1 (WaveNet's and the gated stacks'
// tanh(a) * sigmoid(b), plus a residual), and nothing else reads the Conv's output, so the
// node writes the program's K channels and the 2K are never stored. Inputs: the Conv's X,
// W, B (absent when it had none), then the program's other operands (register k >= 2 is
// input k + 1), each broadcast to the output [N, K, spatial...]. Formed only for devices
// with a kernel for it (passes/fuse_gated_conv.h).
inline constexpr std::string_view kFusedGatedConvOp = "FusedGatedConv";
// What a device decides a gated unit's fusion by (Device::fuses_gated_conv).
struct GatedConvUnit {
  DType dtype = DType::kF32;
  int64_t taps = 1;  // the window's elements
  int64_t in_channels = 0, gated_channels = 0;  // C and K (the Conv's 2K)
  // N x the output's spatial size: the pixels (steps) every channel row has, which is what
  // a kernel's work grows with at a larger batch (0: not known to whoever built the unit).
  int64_t positions = 0;
};
// `shape`'s elements per channel (dim 1): N x spatial; 0 for a shape of rank below 2.
int64_t positions_per_channel(const Shape& shape);
// A MatMul whose output goes through a program (its epilogue: bias, GELU, a residual add)
// before anything reads it. Inputs: A, B, then the program's other operands; register 0 is
// A x B, register k >= 1 is input k + 1, each broadcast to the MatMul's output shape.
inline constexpr std::string_view kFusedMatMulOp = "FusedMatMul";

struct FusedInstruction {
  FusedOp op = FusedOp::kAdd;
  int a = -1, b = -1;  // register numbers; b is -1 for unary ops
  float alpha = 0, beta = 0;
};

struct FusedProgram {
  int inputs = 0;
  std::vector<FusedInstruction> code;
};

// The op's name ("Sigmoid") and number of operands.
std::string_view fused_op_name(FusedOp op);
int fused_op_arity(FusedOp op);
// The op for an ONNX op type, or false when that op cannot be fused.
bool fused_op_from_onnx(std::string_view op_type, FusedOp* op);

// "Mul(x0, Sigmoid(x0))".
std::string describe_fused_program(const FusedProgram& program);

// Writes the program's attributes on `node`; reads and validates them (every register read
// is defined before it, arity matches, limits hold), naming what is wrong.
void write_fused_program(const FusedProgram& program, Node* node);
Result<FusedProgram> read_fused_program(const Node& node);
// The same for a program over `inputs` registers that are not the node's inputs (FusedConv:
// one register, the convolution's result).
Result<FusedProgram> read_fused_program_of(const Node& node, int inputs);

}  // namespace strider
