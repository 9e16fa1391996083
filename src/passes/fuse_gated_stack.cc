#include "passes/fuse_gated_stack.h"

#include <array>
#include <unordered_set>

#include "ops/gated_stack.h"
#include "ops/op_registry.h"
#include "ops/shape_ops.h"

namespace strider {
namespace {

// The gate plus the unit's input, as describe_fused_program spells each order.
bool is_residual_gate(const FusedProgram& program) {
  static const std::array<std::string_view, 4> kForms = {
      "Add(x2, Mul(Tanh(x0), Sigmoid(x1)))", "Add(Mul(Tanh(x0), Sigmoid(x1)), x2)",
      "Add(x2, Mul(Sigmoid(x1), Tanh(x0)))", "Add(Mul(Sigmoid(x1), Tanh(x0)), x2)"};
  const std::string text = describe_fused_program(program);
  for (std::string_view form : kForms)
    if (text == form) return true;
  return false;
}

// The unit `node` is, where it is one a stack may hold.
std::optional<GatedConvUnit> stackable_unit(const Graph& graph, const Node& node) {
  if (node.domain != kStriderDomain || node.op_type != kFusedGatedConvOp || node.inputs.size() != 4 ||
      node.outputs.size() != 1 || node.inputs[0] == kNoValue || node.inputs[3] != node.inputs[0])
    return std::nullopt;
  const Value& x = graph.value(node.inputs[0]);
  const Value& w = graph.value(node.inputs[1]);
  const Value& y = graph.value(node.outputs[0]);
  if (x.shape.size() < 3 || w.shape.size() != x.shape.size() || !w.is_constant() || y.shape != x.shape ||
      y.dtype != x.dtype || w.shape[0] != 2 * x.shape[1] || w.shape[1] != x.shape[1])
    return std::nullopt;
  if (node.inputs[2] != kNoValue && !graph.value(node.inputs[2]).is_constant()) return std::nullopt;
  for (size_t d = 2; d < w.shape.size(); ++d)
    if (w.shape[d] != 1) return std::nullopt;
  Result<int64_t> group = node.attributes.get_int("group", 1);
  Result<WindowGeometry> g =
      resolve_window(NodeInputs(graph, node), std::span(x.shape).subspan(2), std::span(w.shape).subspan(2), false);
  if (!group.is_ok() || *group != 1 || !g.is_ok()) return std::nullopt;
  for (size_t d = 0; d < g->strides.size(); ++d)
    if (g->strides[d] != 1 || g->pads_begin[d] != 0 || g->pads_end[d] != 0) return std::nullopt;
  Result<FusedProgram> program = read_fused_program_of(node, 3);
  if (!program.is_ok() || !is_residual_gate(*program)) return std::nullopt;
  return GatedConvUnit{x.dtype, 1, x.shape[1], x.shape[1], positions_per_channel(x.shape)};
}

}  // namespace

Result<int> fuse_gated_stacks(Graph& graph, const std::function<bool(const GatedConvUnit&)>& pays) {
  const std::vector<std::vector<NodeId>> consumers = graph.consumers();
  const std::unordered_set<ValueId> outputs(graph.outputs().begin(), graph.outputs().end());
  std::vector<bool> unit(size_t(graph.num_nodes()), false);
  for (NodeId id = 0; id < graph.num_nodes(); ++id) {
    std::optional<GatedConvUnit> u = stackable_unit(graph, graph.node(id));
    unit[size_t(id)] = u && (!pays || pays(*u));
  }
  // The unit that follows `id` in a chain, or kNoNode.
  auto next = [&](NodeId id) {
    const ValueId y = graph.node(id).outputs[0];
    const std::vector<NodeId>& readers = consumers[size_t(y)];
    if (outputs.count(y) || readers.empty()) return kNoNode;
    for (NodeId r : readers)
      if (r != readers[0]) return kNoNode;
    return unit[size_t(readers[0])] ? readers[0] : kNoNode;
  };
  std::vector<bool> follows(unit.size(), false);
  for (NodeId id = 0; id < graph.num_nodes(); ++id)
    if (unit[size_t(id)] && next(id) != kNoNode) follows[size_t(next(id))] = true;
  std::unordered_set<const Node*> absorbed;
  std::vector<std::pair<NodeId, Node>> stacks;
  for (NodeId id = 0; id < graph.num_nodes(); ++id) {
    if (!unit[size_t(id)] || follows[size_t(id)]) continue;
    std::vector<const Node*> chain = {&graph.node(id)};
    NodeId last = id;
    for (NodeId n = next(id); n != kNoNode; n = next(n)) {
      absorbed.insert(&graph.node(last));
      chain.push_back(&graph.node(n));
      last = n;
    }
    stacks.emplace_back(last, make_gated_stack(chain));
  }
  for (auto& [id, stack] : stacks) graph.node(id) = std::move(stack);
  graph.remove_nodes_if([&](const Node& n) { return absorbed.count(&n) != 0; });
  return int(stacks.size());
}

}  // namespace strider
