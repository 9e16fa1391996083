// Graph passes that run at session creation, before planning.
//
// infer_and_fold: our own shape and dtype inference, node by node in topological order,
// folding every node whose inputs are all constants by running its CPU kernel on the
// host. Static shapes need this: torch exports `chunk` as Shape -> Gather -> Div -> Slice
// arithmetic, and the Slice's bounds must be known numbers before anything is planned.
// Folded nodes are removed, then nodes no output depends on.
//
// Each node is first checked against its op's signature (ops/signature.h), and every
// output size it infers must be describable (no negative dim, at most 2^52 bytes), else
// INVALID_MODEL naming the node and the value. A folded output's bytes are reserved from
// `budget` (when given) before its kernel runs. Exceptions become Statuses naming the node.
//
// Precondition: every graph input has a known dtype and a fully known shape, and every
// node's op is in the op registry (the session checks both first, with one error each).
#pragma once

#include "base/memory_budget.h"
#include "ir/graph.h"
#include "strider/status.h"

namespace strider {

// A node whose output shapes depend on its input values (ops/data_dependent.h) is folded
// when its inputs are constants; otherwise, with `split_at`, inference stops there: the
// node's id is stored, the nodes before it are inferred and folded and none is removed (the
// session splits the graph at it, exec/staged_session.h). Without `split_at` that node is
// an UNSUPPORTED error naming it. *split_at is kNoNode when inference went through.
Status infer_and_fold(Graph& graph, MemoryBudget* budget = nullptr, NodeId* split_at = nullptr);

// Removes nodes none of whose outputs reaches a graph output.
void remove_dead_nodes(Graph& graph);

}  // namespace strider
