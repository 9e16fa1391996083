// fuse_attention: folds each attention pattern into one FusedAttention node
// (ops/fused_attention.h), so the [.., Sq, T] scores and probabilities are never stored.
//
// The pattern is found from its Softmax (over the last axis, f32, bf16 or f16):
//
//   MatMul(Q, Kt) -> steps -> Softmax -> [Cast] -> [Dropout | Identity]
//                 -> [Where(IsNaN(p), 0, p)] -> MatMul(p, V)
//
// where the steps, at most kMaxScoreSteps of them in any order, are Mul or Div by a scalar
// constant, Add of a bias, and Where of a condition with a scalar constant fill on either
// side: what torch exports for `q @ k.transpose(-2, -1) / sqrt(d) + mask` and for
// `masked_fill`, and what Attention-23 expands to (passes/expand_functions.h). Every value
// inside the pattern must be read only by the next node of the pattern, have the scores'
// shape (a bias may broadcast, the scores may not), and not be a graph output; Q, Kt, V and
// the biases share one dtype, which is the output's. Casts between float types among the
// steps and after the Softmax are absorbed:
// the fused kernel computes the scores and softmax in f32 for every storage type, so it is
// at least as exact as the cast the model asked for.
//
// Runs after shape inference and precision lowering, before fuse_elementwise (which would
// otherwise take the scale and mask into a FusedElementwise), and only for a device that
// has a FusedAttention kernel (the session checks). The fused node takes the final
// MatMul's place and outputs; the planner sees Q, Kt and V as the views they are.
#pragma once

#include <functional>

#include "ir/graph.h"
#include "ops/fused_attention.h"
#include "strider/status.h"

namespace strider {

// The number of patterns fused. `wanted`, when given, is asked about each match's sizes and
// a match it declines stays unfused (a device whose fused kernel is slower at that size).
Result<int> fuse_attention(Graph& graph, const std::function<bool(const AttentionShape&)>& wanted = {});

}  // namespace strider
