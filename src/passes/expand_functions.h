// expand_functions: replaces each node of an op that ONNX defines as a function of other ops,
// and that no strider device runs natively yet, by that function's body in primitive ops
// (Attention-23, ops/attention.h; RotaryEmbedding-23, LpNormalization, OneHot, the NLL
// and softmax cross-entropy losses, ops/function_ops.h). The body's nodes are named "<node>/<Op>_<k>" and
// carry Node::expanded_from ("Attention 'attn_0'"), which `strider inspect` prints on each
// step, so a plan says which of its nodes came from where. The new values get their types
// from the infer_and_fold that the session runs again afterwards; from then on they are
// ordinary nodes: planned (views, in place), fused and checked like any other.
//
// Precondition: infer_and_fold has run (the expansion reads its inputs' shapes).
#pragma once

#include "base/memory_budget.h"
#include "ir/graph.h"
#include "strider/status.h"

namespace strider {

// The number of nodes expanded. The bodies' constants (causal masks, tables) reserve their
// bytes from `budget` when given, before they are built.
Result<int> expand_functions(Graph& graph, MemoryBudget* budget = nullptr);

// Whether expand_functions replaces `node` by a body. infer_and_fold leaves such a node
// unfolded even when its inputs are constant (no device has a kernel for it); its body's
// nodes fold in the inference that follows the expansion.
bool expands_as_function(const Node& node);

}  // namespace strider
