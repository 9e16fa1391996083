// The checks of session creation that turn a bad model or bad options into one clear
// error each: dynamic input dims without sizes, unknown ops, ops the device cannot run.
#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "base/checked_math.h"
#include "strider/printable.h"
#include "exec/session_internal.h"
#include "ops/op_registry.h"
#include "passes/inline_control_flow.h"

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
    text += fmt::format("{} (node{} ", printable(op), nodes.size() > 1 ? "s" : "");
    for (size_t i = 0; i < nodes.size(); ++i) text += fmt::format("{}'{}'", i ? ", " : "", printable(nodes[i]));
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
      if (!checked_element_count(shape, dtype_size(v.dtype)))
        return invalid_argument(fmt::format("input '{}': {}{} is too large (more than 2^52 bytes)", printable(v.name),
                                            dtype_name(v.dtype), shape_to_string(shape)));
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

Status bind_constant_inputs(Graph& graph, const SessionOptions& options) {
  for (const auto& [name, tensor] : options.constant_inputs) {
    auto id = graph.find_value(name);
    auto& inputs = graph.inputs();
    auto it = id ? std::find(inputs.begin(), inputs.end(), *id) : inputs.end();
    if (it == inputs.end()) return invalid_argument(fmt::format("constant input '{}' is not a model input", name));
    Value& v = graph.value(*id);
    if (v.has_type && v.dtype != tensor.dtype())
      return invalid_argument(fmt::format("input '{}': got {}, expected {}", name, dtype_name(tensor.dtype()),
                                          dtype_name(v.dtype)));
    if (v.has_shape) {
      if (v.shape.size() != tensor.shape().size())
        return invalid_argument(fmt::format("input '{}': got rank {}, expected rank {}", name, tensor.rank(), v.shape.size()));
      for (size_t d = 0; d < v.shape.size(); ++d)
        if (v.shape[d] >= 0 && v.shape[d] != tensor.shape()[d])
          return invalid_argument(fmt::format("input '{}' dim {}: got {}, expected {}", name, d, tensor.shape()[d], v.shape[d]));
    }
    v.has_type = v.has_shape = true;
    v.dtype = tensor.dtype();
    v.shape = tensor.shape();
    v.constant = std::make_shared<const Tensor>(tensor);
    inputs.erase(it);
  }
  return Status::ok();
}

namespace {

std::vector<bool> values_deciding_shapes(const Graph& graph);

// A control-flow node's inputs that decide the shapes inside its bodies (their outer
// references are the node's implicit inputs; Loop's and Scan's formal states start as the
// node's state inputs). Not If's condition or Loop's count: a decision known only at run
// time splits the session there (exec/staged_session.h); marking them would make a
// dynamic session compile a plan per input value.
void mark_control_inputs(const Node& node, std::vector<bool>& needed) {
  const std::vector<std::string> implicit = implicit_input_names(node);
  const size_t explicit_count = node.inputs.size() - implicit.size();
  for (const auto& [name, attribute] : node.attributes.all()) {
    if (!attribute.graph) continue;
    const Graph& body = attribute.graph->graph;
    std::vector<bool> body_needed = values_deciding_shapes(body);
    for (ValueId v = 0; v < body.num_values(); ++v) {
      if (!body_needed[size_t(v)]) continue;
      auto outer = std::find(implicit.begin(), implicit.end(), body.value(v).name);
      if (body.value(v).producer == kNoNode && outer != implicit.end())
        needed[size_t(node.inputs[explicit_count + size_t(outer - implicit.begin())])] = true;
    }
    // Loop's body reads (iteration, condition, states...), Scan-9's (states..., elements...).
    const size_t first_state = node.op_type == "Loop" ? 2 : 0;
    for (size_t k = first_state; k < body.inputs().size(); ++k)
      if (body_needed[size_t(body.inputs()[k])] && k < explicit_count)
        if (ValueId in = node.input(k); in != kNoValue) needed[size_t(in)] = true;
  }
}

std::vector<bool> values_deciding_shapes(const Graph& graph) {
  std::vector<bool> needed(size_t(graph.num_values()), false);
  for (NodeId id = graph.num_nodes(); id-- > 0;) {
    const Node& node = graph.node(id);
    const OpSchema* schema = find_op_schema(node.domain, node.op_type);
    if (is_control_flow(node)) {
      mark_control_inputs(node, needed);
    } else if (schema == nullptr) {
      continue;
    } else {
      for (int i : schema->shape_inputs)
        if (ValueId in = node.input(size_t(i)); in != kNoValue) needed[size_t(in)] = true;
    }
    // A node whose output must be known needs all its inputs known, except Shape and Size,
    // which need only their input's shape.
    bool output_needed = false;
    for (ValueId out : node.outputs) output_needed |= out != kNoValue && needed[size_t(out)];
    if (!output_needed || node.op_type == "Shape" || node.op_type == "Size") continue;
    for (ValueId in : node.inputs)
      if (in != kNoValue) needed[size_t(in)] = true;
  }
  return needed;
}

}  // namespace

std::vector<std::string> shape_determining_inputs(const Graph& graph) {
  std::vector<bool> needed = values_deciding_shapes(graph);
  std::vector<std::string> names;
  for (ValueId id : graph.inputs())
    if (needed[size_t(id)]) names.push_back(graph.value(id).name);
  return names;
}

namespace {

// The ops of `graph` and of every body in it that strider does not know, by op.
void collect_unknown_ops(const Graph& graph, std::map<std::string, std::vector<std::string>>& unknown) {
  for (NodeId id = 0; id < graph.num_nodes(); ++id) {
    const Node& node = graph.node(id);
    if (is_control_flow(node)) {
      for (const auto& [name, attribute] : node.attributes.all())
        if (attribute.graph) collect_unknown_ops(attribute.graph->graph, unknown);
      continue;
    }
    if (find_op_schema(node.domain, node.op_type)) continue;
    std::string op = node.domain.empty() ? node.op_type : node.domain + "::" + node.op_type;
    unknown[op].push_back(node.name);
  }
}

}  // namespace

Status check_ops_known(const Graph& graph) {
  std::map<std::string, std::vector<std::string>> unknown;
  collect_unknown_ops(graph, unknown);
  if (unknown.empty()) return Status::ok();
  return unsupported(fmt::format("the model uses {} unsupported op{}: {}", unknown.size(),
                                 unknown.size() > 1 ? "s" : "", list_by_op(unknown)));
}

}  // namespace strider
