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

// One UNSUPPORTED error listing every node whose op strider does not know (nullopt if none).
Status check_ops_known(const Graph& graph);

}  // namespace strider
