// verify_plan: the checks that make a plan trustworthy, run after every planning
// (PlanOptions::verify, on by default, Release builds too):
// - every value's view lies inside its allocation;
// - every buffer starts 64-byte aligned;
// - two arena buffers whose lifetimes overlap share no byte;
// - inside one buffer, two values written by different steps and live at the same time
//   (the parts of a concat) share no byte, unless one aliases the other.
// A failure is an INTERNAL error naming both values and the byte ranges: a planner bug.
#pragma once

#include "ir/graph.h"
#include "plan/plan.h"

namespace strider {

Status verify_plan(const Graph& graph, const Plan& plan);

}  // namespace strider
