// Evaluates one node on host tensors with the CPU kernels. Constant folding uses it at
// session creation, so folded values are computed by the same kernels that run the model
// (exact integer shape arithmetic included).
#pragma once

#include <vector>

#include "ir/graph.h"
#include "strider/tensor.h"

namespace strider::cpu {

// Every input of `node` must be a constant in `graph` and every output must have a known
// dtype and shape. Returns one tensor per output (an empty Tensor for omitted outputs).
Result<std::vector<Tensor>> evaluate_on_host(const Graph& graph, const Node& node);

}  // namespace strider::cpu
