// A FusedGatedStack unit's gate (ops/gated_stack.h) on one channel, in f32: the CPU and
// CUDA kernels both call this, so the stack computes the formula the unfused unit's map
// kernels do (ops/elementwise_math.h's functors, each instruction rounded to f32).
#pragma once

#include "ops/elementwise_math.h"

namespace strider {

// h + tanh(a) * sigmoid(b).
STRIDER_HOST_DEVICE float gated_residual(float h, float a, float b) {
  using fused_math::apply;
  const float gate = apply<FusedOp::kMul>(apply<FusedOp::kTanh>(a, 0.0f, 0.0f, 0.0f),
                                          apply<FusedOp::kSigmoid>(b, 0.0f, 0.0f, 0.0f), 0.0f, 0.0f);
  return apply<FusedOp::kAdd>(h, gate, 0.0f, 0.0f);
}

}  // namespace strider
