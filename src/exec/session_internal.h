// Creating a session from an IR graph (tests build graphs with GraphBuilder).
#pragma once

#include <memory>

#include "ir/graph.h"
#include "plan/planner.h"
#include "strider/session.h"

namespace strider {

Result<std::unique_ptr<Session>> create_session(Graph graph, const SessionOptions& options);
// The same with explicit planner options (tests run the planner on and off).
Result<std::unique_ptr<Session>> create_session(Graph graph, const SessionOptions& options,
                                                const PlanOptions& plan_options);

// The plan and graph a session runs, for `strider inspect` and the planner tests.
struct SessionPlanView {
  const Graph* graph;
  const Plan* plan;
  std::vector<std::string> kernel_names;  // per step; empty for steps that run nothing
  std::vector<int> queue_of_step;         // per step
  bool uses_graph = false;                // the steps run as one captured CUDA graph
};
SessionPlanView inspect_session(const Session& session);

// Runs the session's steps once more on the inputs of its last run and returns the device
// time in ms (CUDA events on a GPU); outputs stay on the device. For benchmarks.
Result<double> time_device_steps(Session& session);

// A kernel step's output as it was right after the step ran.
struct TappedValue {
  std::string value, node, op_type;  // names in the session's graph (after fusion)
  Tensor tensor;                     // in the session's compute dtype
};
// Runs `session` on `inputs` as Session::run does (same plan, step by step) and returns
// every kernel step's outputs in step order, for locating the first node that went wrong.
Result<std::vector<TappedValue>> run_with_taps(Session& session, const std::vector<Tensor>& inputs);

// Shapes every graph input must have, from the model and `options.input_shapes`. An input
// with a dynamic dimension the options do not give is an INVALID_ARGUMENT naming it.
Status resolve_input_shapes(Graph& graph, const SessionOptions& options);

// Turns the inputs named in `options.constant_inputs` into constants (checking dtype and
// shape against the model) and drops them from the graph's inputs.
Status bind_constant_inputs(Graph& graph, const SessionOptions& options);

// The graph inputs whose values decide shapes: read, directly or through other nodes, by an
// op's shape input (OpSchema::shape_inputs). Shape and Size read only their input's shape.
std::vector<std::string> shape_determining_inputs(const Graph& graph);

// The storage mode from the option, else STRIDER_STORAGE_MODE, else device.
Result<StorageMode> resolve_storage_mode(const std::string& option);

// One UNSUPPORTED error listing every node whose op strider does not know (nullopt if none).
Status check_ops_known(const Graph& graph);

}  // namespace strider
