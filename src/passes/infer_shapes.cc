#include "passes/infer_shapes.h"

#include <fmt/format.h>

#include "hal/cpu/host_evaluator.h"
#include "ops/op_registry.h"

namespace strider {
namespace {

std::string node_label(const Node& node) { return fmt::format("node '{}' ({})", node.name, node.op_type); }

bool all_outputs_constant(const Graph& graph, const Node& node) {
  for (ValueId out : node.outputs)
    if (out != kNoValue && !graph.value(out).is_constant()) return false;
  return true;
}

bool all_inputs_constant(const Graph& graph, const Node& node) {
  for (ValueId in : node.inputs)
    if (in != kNoValue && !graph.value(in).is_constant()) return false;
  return true;
}

Status check_inputs_typed(const Graph& graph, const Node& node) {
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    ValueId in = node.inputs[i];
    if (in == kNoValue) continue;
    const Value& v = graph.value(in);
    if (!v.has_type || !v.has_shape)
      return internal_error(fmt::format("{} input {} '{}' has no inferred type", node_label(node), i, v.name));
  }
  return Status::ok();
}

Status fold(Graph& graph, NodeId id) {
  const Node& node = graph.node(id);
  STRIDER_ASSIGN_OR_RETURN(std::vector<Tensor> values, cpu::evaluate_on_host(graph, node));
  for (size_t i = 0; i < node.outputs.size(); ++i)
    if (node.outputs[i] != kNoValue)
      graph.value(node.outputs[i]).constant = std::make_shared<const Tensor>(std::move(values[i]));
  return Status::ok();
}

}  // namespace

Status infer_and_fold(Graph& graph) {
  for (NodeId id = 0; id < graph.num_nodes(); ++id) {
    const Node& node = graph.node(id);
    const OpSchema* schema = find_op_schema(node.domain, node.op_type);
    if (schema == nullptr) return unsupported(fmt::format("{} is not a supported op", node_label(node)));
    STRIDER_RETURN_IF_ERROR(check_inputs_typed(graph, node));
    InferContext context(graph, id);
    Status inferred = schema->infer(context);
    if (!inferred.is_ok()) return inferred.with_context(node_label(node));
    if (all_outputs_constant(graph, node) || !all_inputs_constant(graph, node)) continue;
    Status folded = fold(graph, id);
    if (!folded.is_ok()) return folded.with_context("while folding constants");
  }
  graph.remove_nodes_if([&](const Node& node) { return all_outputs_constant(graph, node); });
  remove_dead_nodes(graph);
  return Status::ok();
}

void remove_dead_nodes(Graph& graph) {
  std::vector<bool> needed(size_t(graph.num_values()), false);
  for (ValueId out : graph.outputs()) needed[size_t(out)] = true;
  std::vector<bool> live(size_t(graph.num_nodes()), false);
  for (NodeId id = graph.num_nodes(); id-- > 0;) {
    const Node& node = graph.node(id);
    for (ValueId out : node.outputs)
      if (out != kNoValue && needed[size_t(out)]) live[size_t(id)] = true;
    if (!live[size_t(id)]) continue;
    for (ValueId in : node.inputs)
      if (in != kNoValue) needed[size_t(in)] = true;
  }
  NodeId index = 0;
  graph.remove_nodes_if([&](const Node&) { return !live[size_t(index++)]; });
}

}  // namespace strider
