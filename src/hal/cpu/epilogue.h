// A fused program over a primitive's result (FusedMatMul's epilogue, FusedConv's activation
// and residual add) as oneDNN post-ops, so the result is written once, already finished.
//
// The program is read as an expression and peeled from its result inward, each layer a
// post-op over the layer below, down to register 0 (the primitive's result). What peels: an
// Add of a row ([..., N], when `allow_bias`) to the result itself as the primitive's bias;
// Add, Sub, Mul, Div of the running value with an operand as binary post-ops (a packed
// operand only, with the output's strides when it has the output's shape: oneDNN read a
// strided one wrongly); one-input
// activations as eltwise post-ops (onednn_eltwise_of); and activations exporters write as
// several ops, matched as expressions (products in any grouping, constants within their
// dtype's rounding): GELU with erf, GELU's tanh form (GPT-2), SiLU (Llama's gate).
// Anything else: nullopt, and the caller runs the program as its own pass. The meaning is
// the program's; oneDNN's arithmetic is its own, within the f32 tolerance.
#pragma once

#include <optional>
#include <vector>

#include "hal/cpu/onednn.h"
#include "hal/kernel.h"
#include "ops/fused_elementwise.h"

namespace strider::cpu {

struct PostOpPlan {
  std::optional<TensorView> bias;  // at the output's rank
  std::vector<OneDnnPostOp> ops;
};

// Register k >= 1 of `program` is request.inputs[k + operand_offset].
std::optional<PostOpPlan> plan_post_ops(const KernelRequest& request, const FusedProgram& program,
                                        const TensorView& out, size_t operand_offset, bool allow_bias);

}  // namespace strider::cpu
