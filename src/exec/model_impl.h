// Model::Impl: the imported graph a Model holds, and how a graph's inputs and outputs are
// described to users (shared with DynamicSession).
#pragma once

#include "ir/graph.h"
#include "strider/model.h"

namespace strider {

struct Model::Impl {
  std::string path;
  Graph graph;  // as imported; sessions copy it
  std::vector<ValueInfo> inputs, outputs;
  std::vector<std::string> shape_inputs;
};

// The graph's inputs as it declares them.
std::vector<ValueInfo> describe_inputs(const Graph& graph);
// The outputs as the model declares them; where it declares no type, the value's own.
std::vector<ValueInfo> describe_outputs(const Graph& graph);

}  // namespace strider
