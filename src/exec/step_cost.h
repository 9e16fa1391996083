// What a step must at least move and compute, for profiles: the bytes of every operand
// view read or written once (an upper bound for broadcast operands, a lower bound for
// steps that re-read), and the multiply-adds of the ops that do arithmetic per output
// (convolutions, products, attention), counted as 2 FLOPs each. A profile divides them by
// the step's time: achieved bandwidth and FLOP/s against the device's ceilings.
#pragma once

#include <cstdint>

#include "ir/graph.h"
#include "plan/plan.h"

namespace strider {

struct StepCost {
  int64_t bytes = 0;
  double flops = 0;  // 0: not an op whose arithmetic is counted
};

StepCost step_cost(const Plan& plan, const Node& node);

}  // namespace strider
