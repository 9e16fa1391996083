// A plan as text (`strider inspect`, golden plan tests), as JSON, and as an SVG memory
// timeline. All three are deterministic for a given graph, device and options: kernel
// implementation names, which vary by machine, are only printed when passed in.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"
#include "plan/plan.h"

namespace strider {

// One block per step (op, node, what runs, each operand's allocation+offset, sizes,
// strides and role), then a summary. `kernel_names` (per step, may be empty) adds the
// implementation of each kernel.
std::string plan_to_text(const Graph& graph, const Plan& plan, const std::vector<std::string>& kernel_names = {});
// Keys: layout, arena_bytes, lower_bound_bytes, steps, kernels, views, concat_in_place,
// in_place, materializations, copies, allocations, buffers, step_list.
std::string plan_to_json(const Graph& graph, const Plan& plan, const std::vector<std::string>& kernel_names = {});
// Arena timeline: x is the step, y the arena offset; one box per value held in the arena.
std::string plan_to_svg(const Graph& graph, const Plan& plan);

}  // namespace strider
