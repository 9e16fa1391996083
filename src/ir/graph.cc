#include "ir/graph.h"

#include <fmt/format.h>

#include "strider/printable.h"

#include <algorithm>

namespace strider {

Result<ValueId> Graph::add_value(std::string name) {
  if (by_name_.count(name)) return invalid_model(fmt::format("value '{}' is defined twice", name));
  ValueId id = ValueId(values_.size());
  by_name_[name] = id;
  Value v;
  v.name = std::move(name);
  values_.push_back(std::move(v));
  return id;
}

Result<NodeId> Graph::add_node(Node node) {
  for (ValueId in : node.inputs)
    if (in != kNoValue && (in < 0 || in >= num_values()))
      return internal_error(fmt::format("node '{}' reads value id {} that does not exist",
                                        node.name, in));
  NodeId id = NodeId(nodes_.size());
  for (ValueId out : node.outputs) {
    if (out == kNoValue) continue;
    if (out < 0 || out >= num_values())
      return internal_error(fmt::format("node '{}' writes value id {} that does not exist",
                                        node.name, out));
    Value& v = values_[size_t(out)];
    if (v.producer != kNoNode || v.is_constant())
      return invalid_model(fmt::format("value '{}' is produced twice (again by node '{}')",
                                       v.name, node.name));
    v.producer = id;
  }
  nodes_.push_back(std::move(node));
  return id;
}

Result<NodeId> Graph::insert_node(NodeId position, Node node) {
  if (position < 0 || position > num_nodes())
    return internal_error(fmt::format("insert of node '{}' at {} of {}", node.name, position, num_nodes()));
  STRIDER_ASSIGN_OR_RETURN(NodeId appended, add_node(std::move(node)));
  std::rotate(nodes_.begin() + position, nodes_.begin() + appended, nodes_.end());
  relink_producers();
  return position;
}

Status Graph::replace_with_appended(NodeId id, NodeId first_appended) {
  return replace_with_appended_bodies({{id, first_appended, num_nodes()}});
}

Status Graph::replace_with_appended_bodies(const std::vector<AppendedBody>& bodies) {
  if (bodies.empty()) return Status::ok();
  const NodeId kept_end = bodies.front().first;
  NodeId next_first = kept_end, previous = kNoNode;
  for (const AppendedBody& b : bodies) {
    if (b.replaced <= previous || b.replaced >= kept_end || b.first != next_first || b.end < b.first ||
        b.end > num_nodes())
      return internal_error(fmt::format("replace node {} by nodes {}..{} of {} (the appended nodes start at {})",
                                        b.replaced, b.first, b.end, num_nodes(), kept_end));
    previous = b.replaced;
    next_first = b.end;
  }
  if (next_first != num_nodes())
    return internal_error(fmt::format("nodes {}..{} were appended for no node they replace", next_first, num_nodes()));
  std::vector<Node> ordered;
  ordered.reserve(size_t(num_nodes() - NodeId(bodies.size())));
  auto body = bodies.begin();
  for (NodeId id = 0; id < kept_end; ++id) {
    if (body != bodies.end() && body->replaced == id) {
      for (NodeId b = body->first; b < body->end; ++b) ordered.push_back(std::move(nodes_[size_t(b)]));
      ++body;
    } else {
      ordered.push_back(std::move(nodes_[size_t(id)]));
    }
  }
  nodes_ = std::move(ordered);
  relink_producers();
  return Status::ok();
}

void Graph::release_outputs(NodeId id) {
  for (ValueId& out : nodes_.at(size_t(id)).outputs)
    if (out != kNoValue) values_[size_t(out)].producer = kNoNode;
  nodes_.at(size_t(id)).outputs.clear();
}

std::optional<ValueId> Graph::find_value(const std::string& name) const {
  auto it = by_name_.find(name);
  if (it == by_name_.end()) return std::nullopt;
  return it->second;
}

std::vector<std::vector<NodeId>> Graph::consumers() const {
  std::vector<std::vector<NodeId>> result(values_.size());
  for (NodeId n = 0; n < num_nodes(); ++n)
    for (ValueId in : nodes_[size_t(n)].inputs)
      if (in != kNoValue) result[size_t(in)].push_back(n);
  return result;
}

void Graph::relink_producers() {
  for (Value& v : values_) v.producer = kNoNode;
  for (NodeId n = 0; n < num_nodes(); ++n)
    for (ValueId out : nodes_[size_t(n)].outputs)
      if (out != kNoValue) values_[size_t(out)].producer = n;
}

std::string describe_node(const Node& node) {
  return fmt::format("node '{}' ({})", printable(node.name), printable(node.op_type));
}

std::string Graph::describe_value(ValueId id) const {
  const Value& v = value(id);
  if (!v.has_type) return fmt::format("value '{}'", printable(v.name));
  return fmt::format("value '{}' ({}{})", printable(v.name), dtype_name(v.dtype),
                     v.has_shape ? shape_to_string(v.shape) : "[?]");
}

std::vector<std::string> implicit_input_names(const Node& node) {
  std::vector<std::string> names;
  for (const auto& [name, attribute] : node.attributes.all()) {
    if (!attribute.graph) continue;
    for (const std::string& outer : attribute.graph->outer)
      if (std::find(names.begin(), names.end(), outer) == names.end()) names.push_back(outer);
  }
  return names;
}

size_t explicit_input_count(const Node& node) {
  const size_t implicit = implicit_input_names(node).size();
  return node.inputs.size() >= implicit ? node.inputs.size() - implicit : 0;
}

}  // namespace strider
