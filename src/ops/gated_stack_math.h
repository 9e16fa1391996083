// The gate of a FusedGatedStack unit (ops/gated_stack.h) and of a FusedWaveNetLayer
// (ops/wavenet_layer.h) on one channel, in f32: the CPU and
// CUDA kernels both call this, so the stack computes the formula the unfused unit's map
// kernels do (ops/elementwise_math.h's functors, each instruction rounded to f32).
#pragma once

#include "ops/elementwise_math.h"

namespace strider {

// tanh(a) * sigmoid(b): a gated unit's gate (also FusedWaveNetLayer's, ops/wavenet_layer.h).
STRIDER_HOST_DEVICE float gate_of(float a, float b) {
  using fused_math::apply;
  return apply<FusedOp::kMul>(apply<FusedOp::kTanh>(a, 0.0f, 0.0f, 0.0f), apply<FusedOp::kSigmoid>(b, 0.0f, 0.0f, 0.0f),
                              0.0f, 0.0f);
}

// h + tanh(a) * sigmoid(b).
STRIDER_HOST_DEVICE float gated_residual(float h, float a, float b) {
  return fused_math::apply<FusedOp::kAdd>(h, gate_of(a, b), 0.0f, 0.0f);
}

}  // namespace strider
