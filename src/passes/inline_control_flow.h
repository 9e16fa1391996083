// inline_control_flow: If, Loop and Scan become the nodes their bodies run.
//
// Why. A plan is static (docs/ARCHITECTURE.md): every step and every value's shape is known
// when the session is made. Control flow whose decisions are known then (a condition
// computed from shapes, as torch's exports have; a trip count; a scan over a static axis)
// is therefore not control flow at run time: the session runs the branch taken, or the body
// once per iteration, as ordinary nodes that are planned (views, in place, concat in place),
// fused and checked like any other. A decision that needs run-time values (a condition
// computed from the inputs' values) is a data-dependent node: the session splits there
// (exec/staged_session.h) and the node is inlined on the host with its inputs as
// constants, where every decision folds.
//
//   If    the branch its condition selects.
//   Scan  its body once per step along each scan input's axis, in the direction asked
//         (opset 8's batch axis: once per batch row too); the scan outputs are the steps'
//         values stacked by Unsqueeze + Concat (which the planner writes in place).
//   Loop  its body once per iteration while the trip count and condition allow; each
//         iteration's condition must fold to a constant, which the unrolling checks after
//         inferring that iteration (so a loop whose condition depends on values needs the
//         split). Scan outputs stack along axis 0.
//
// A body's nodes are named "<node>/<branch or step>/<name>", its values likewise. Bodies
// read the enclosing graph's values through the node's implicit inputs (ir/graph.h:
// Subgraph). At most kMaxUnrolledSteps iterations per node and kMaxInlinedNodes nodes per
// graph: past those the model is refused with a message saying so.
#pragma once

#include <functional>

#include "ir/graph.h"
#include "strider/status.h"

namespace strider {

inline constexpr int64_t kMaxUnrolledSteps = 4096;
inline constexpr int64_t kMaxInlinedNodes = 200000;

bool is_control_flow(const Node& node);

// Infers and folds the nodes of `graph` from `first` to the end (infer_and_fold's step):
// true when every one was inferred, false when one needs values known only at run time.
using InferAppended = std::function<Result<bool>(Graph& graph, NodeId first)>;

// Replaces control-flow node `id` by what it runs. Returns false, with the graph
// unchanged, when that needs values known only at run time.
Result<bool> inline_control_flow(Graph& graph, NodeId id, const InferAppended& infer);

}  // namespace strider
