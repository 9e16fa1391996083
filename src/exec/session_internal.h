// Creating a session from an IR graph (tests build graphs with GraphBuilder).
#pragma once

#include <memory>
#include <unordered_set>

#include "ir/graph.h"
#include "plan/bind.h"
#include "passes/lower_precision.h"
#include "passes/merge_sibling_matmuls.h"
#include "plan/planner.h"
#include "strider/dynamic_session.h"
#include "strider/session.h"
#include "strider/tools.h"

namespace strider {

// What sessions made for one model share (a DynamicSession's cached shapes): one device,
// one store of device constants (so a weight is uploaded once), and one memory budget that
// every session's host and device memory is reserved from (each session's host bytes in a
// child budget, returned when it goes). `host_constants`: host tensors already reserved
// there (the imported weights), which a session does not count again.
struct SessionResources {
  std::shared_ptr<MemoryBudget> budget;
  std::shared_ptr<Device> device;
  std::shared_ptr<DeviceConstants> constants;
  std::unordered_set<const Tensor*> host_constants;
  // bf16 sessions: the weights' bf16 copies, one per weight for every plan.
  std::shared_ptr<LoweredConstants> bf16_constants = std::make_shared<LoweredConstants>();
  // Sibling MatMuls' weights side by side (passes/merge_sibling_matmuls.h), one per group for every plan.
  std::shared_ptr<MergedWeights> merged_weights = std::make_shared<MergedWeights>();
};
// A device and an empty constant store for `options` (its device, queues, storage mode, memory).
Result<std::shared_ptr<SessionResources>> make_session_resources(const SessionOptions& options);

Result<std::unique_ptr<Session>> create_session(Graph graph, const SessionOptions& options);
// The same with explicit planner options (tests run the planner on and off).
Result<std::unique_ptr<Session>> create_session(Graph graph, const SessionOptions& options,
                                                const PlanOptions& plan_options);
// Switches for proving the checkers work, kept out of the public SessionOptions.
struct SessionDebugOptions {
  // Drop every cross-queue wait, to show that the sim device and the sanitizer catch the
  // damage. Never for real use.
  bool drop_waits = false;
};

// The same on shared resources (null: its own), with debug switches.
Result<std::unique_ptr<Session>> create_session(Graph graph, const SessionOptions& options,
                                                const PlanOptions& plan_options,
                                                std::shared_ptr<SessionResources> resources,
                                                const SessionDebugOptions& debug = {});
// The planner options SessionOptions ask for (their layout).
Result<PlanOptions> plan_options_for(const SessionOptions& options);

// The plan and graph a session runs, for `strider inspect` and the planner tests.
struct SessionPlanView {
  const Graph* graph;
  const Plan* plan;
  std::vector<std::string> kernel_names;  // per step; empty for steps that run nothing
  std::vector<int> queue_of_step;         // per step
  bool uses_graph = false;                // the steps run as one captured unit (CUDA graph; CPU: one command)
};
SessionPlanView inspect_session(const Session& session);

// How many plans the session has bound to a caller's memory (IoBinding) so far: a run on
// addresses it has seen makes none.
int64_t bound_variants_made(const Session& session);
// Where the kernels of the last bound run read each graph input and write each graph
// output (inputs, then outputs): the caller's addresses, when nothing is copied. For tests.
std::vector<const void*> bound_addresses(const Session& session);
// The same for the Session a DynamicSession ran last.
std::vector<const void*> bound_addresses(const DynamicSession& session);

// time_device_steps, run_with_taps: strider/tools.h.

// Shapes every graph input must have, from the model and `options.input_shapes`. An input
// with a dynamic dimension the options do not give is an INVALID_ARGUMENT naming it.
Status resolve_input_shapes(Graph& graph, const SessionOptions& options);

// Turns the inputs named in `options.constant_inputs` into constants (checking dtype and
// shape against the model) and drops them from the graph's inputs.
Status bind_constant_inputs(Graph& graph, const SessionOptions& options);

// The graph inputs whose values decide shapes: read, directly or through other nodes, by an
// op's shape input (OpSchema::shape_inputs). Shape and Size read only their input's shape.
std::vector<std::string> shape_determining_inputs(const Graph& graph);


// One UNSUPPORTED error listing every node whose op strider does not know (nullopt if none).
Status check_ops_known(const Graph& graph);

}  // namespace strider
