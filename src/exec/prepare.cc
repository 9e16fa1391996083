// The checks of session creation that turn a bad model or bad options into one clear
// error each: dynamic input dims without sizes, unknown ops, ops the device cannot run.
#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "exec/session_internal.h"
#include "ops/op_registry.h"

namespace strider {
namespace {

std::string dim_name(const Value& v, size_t d) {
  if (d < v.dim_params.size() && !v.dim_params[d].empty() && v.dim_params[d] != "?")
    return fmt::format(" ('{}')", v.dim_params[d]);
  return "";
}

// "Foo (nodes 'a', 'b'), Bar (node 'c')"
std::string list_by_op(const std::map<std::string, std::vector<std::string>>& nodes_by_op) {
  std::string text;
  for (const auto& [op, nodes] : nodes_by_op) {
    if (!text.empty()) text += ", ";
    text += fmt::format("{} (node{} ", op, nodes.size() > 1 ? "s" : "");
    for (size_t i = 0; i < nodes.size(); ++i) text += fmt::format("{}'{}'", i ? ", " : "", nodes[i]);
    text += ")";
  }
  return text;
}

}  // namespace

Status resolve_input_shapes(Graph& graph, const SessionOptions& options) {
  for (const auto& [name, shape] : options.input_shapes) {
    auto id = graph.find_value(name);
    bool is_input = id && std::find(graph.inputs().begin(), graph.inputs().end(), *id) != graph.inputs().end();
    if (!is_input) return invalid_argument(fmt::format("--shape names '{}', which is not a model input", name));
  }
  for (ValueId id : graph.inputs()) {
    Value& v = graph.value(id);
    auto given = options.input_shapes.find(v.name);
    if (given != options.input_shapes.end()) {
      const Shape& shape = given->second;
      if (v.has_shape && shape.size() != v.shape.size())
        return invalid_argument(fmt::format("input '{}': got rank {} ({}), expected rank {} ({})", v.name,
                                            shape.size(), shape_to_dims(shape), v.shape.size(),
                                            shape_to_string(v.shape)));
      for (size_t d = 0; d < shape.size(); ++d) {
        if (shape[d] < 0) return invalid_argument(fmt::format("input '{}' dim {}: size {} is negative", v.name, d, shape[d]));
        if (v.has_shape && v.shape[d] >= 0 && v.shape[d] != shape[d])
          return invalid_argument(fmt::format("input '{}' dim {}: got {}, expected {}", v.name, d, shape[d], v.shape[d]));
      }
      v.shape = shape;
      v.has_shape = true;
      continue;
    }
    if (!v.has_shape) return invalid_argument(fmt::format("input '{}' has no shape in the model; give it with --shape", v.name));
    for (size_t d = 0; d < v.shape.size(); ++d)
      if (v.shape[d] < 0)
        return invalid_argument(fmt::format(
            "input '{}' dim {}{} is dynamic; give its size with --shape {}:{} or by passing the input",
            v.name, d, dim_name(v, d), v.name, shape_to_dims(v.shape)));
  }
  return Status::ok();
}

Status check_ops_known(const Graph& graph) {
  std::map<std::string, std::vector<std::string>> unknown;
  for (NodeId id = 0; id < graph.num_nodes(); ++id) {
    const Node& node = graph.node(id);
    if (find_op_schema(node.domain, node.op_type)) continue;
    std::string op = node.domain.empty() ? node.op_type : node.domain + "::" + node.op_type;
    unknown[op].push_back(node.name);
  }
  if (unknown.empty()) return Status::ok();
  return unsupported(fmt::format("the model uses {} unsupported op{}: {}", unknown.size(),
                                 unknown.size() > 1 ? "s" : "", list_by_op(unknown)));
}

}  // namespace strider
