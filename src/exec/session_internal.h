// Creating a session from an IR graph (tests build graphs with GraphBuilder).
#pragma once

#include <memory>

#include "ir/graph.h"
#include "strider/session.h"

namespace strider {

Result<std::unique_ptr<Session>> create_session(Graph graph, const SessionOptions& options);

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
