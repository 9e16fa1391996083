// Plan: what the executor runs. Every value used at run time has a TensorView on an
// allocation of the session's device; every step is one node with the views of its
// operands, fixed at session creation.
//
// This first planner (make_dense_plan) is deliberately simple: one dense allocation per
// value, constants uploaded once, every data-movement op a real copy. The memory planner
// (views, concat in place, arena packing) replaces it without changing this structure.
#pragma once

#include <optional>
#include <vector>

#include "hal/device.h"
#include "ir/graph.h"

namespace strider {

struct PlanStep {
  NodeId node = kNoNode;
  std::vector<TensorView> inputs;   // allocation == nullptr for an omitted input
  std::vector<TensorView> outputs;  // allocation == nullptr for an omitted output
};

struct Plan {
  std::vector<AllocationHandle> allocations;
  std::vector<std::optional<TensorView>> views;  // per ValueId; empty when unused
  std::vector<PlanStep> steps;
};

// One allocation per runtime value and per constant it reads; constants are uploaded.
Result<Plan> make_dense_plan(const Graph& graph, Device& device);

}  // namespace strider
