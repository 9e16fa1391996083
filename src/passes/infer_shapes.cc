#include "passes/infer_shapes.h"

#include <fmt/format.h>

#include "base/checked_math.h"
#include "base/exception_guard.h"
#include "strider/printable.h"
#include "hal/cpu/host_evaluator.h"
#include "ops/data_dependent.h"
#include "ops/op_registry.h"
#include "ops/signature.h"
#include "passes/expand_functions.h"
#include "passes/inline_control_flow.h"

namespace strider {
namespace {


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
      return internal_error(fmt::format("{} input {} '{}' has no inferred type", describe_node(node), i,
                                        printable(v.name)));
  }
  return Status::ok();
}

// Every output a shape function set is a describable tensor: no negative dim, at most
// 2^52 bytes. This is the one gate every intermediate size passes, so the planner,
// kernels and the reference never compute with a size that wrapped.
Status check_outputs(const Graph& graph, const Node& node) {
  for (ValueId out : node.outputs) {
    if (out == kNoValue) continue;
    const Value& v = graph.value(out);
    if (!v.has_type || !v.has_shape)  // the signature allows it, but the op never produces it
      return invalid_model(fmt::format("{}: output '{}' is not one the op produces", describe_node(node),
                                       printable(v.name)));
    for (int64_t d : v.shape)
      if (d < 0)
        return invalid_model(fmt::format("{}: output '{}' {}{} has a negative dim", describe_node(node),
                                         printable(v.name), dtype_name(v.dtype), shape_to_string(v.shape)));
    if (!checked_element_count(v.shape, dtype_size(v.dtype)))
      return invalid_model(fmt::format("{}: output '{}' {}{} is too large (more than 2^52 bytes)",
                                       describe_node(node), printable(v.name), dtype_name(v.dtype),
                                       shape_to_string(v.shape)));
  }
  return Status::ok();
}

// Reserves the folded outputs' bytes, then runs the node's CPU kernel on the host.
Status fold(Graph& graph, NodeId id, MemoryBudget* budget) {
  const Node& node = graph.node(id);
  if (budget)
    for (ValueId out : node.outputs) {
      if (out == kNoValue) continue;
      const Value& v = graph.value(out);
      STRIDER_RETURN_IF_ERROR(budget->reserve(num_elements(v.shape) * dtype_size(v.dtype),
                                              fmt::format("folded constant '{}'", printable(v.name))));
    }
  STRIDER_ASSIGN_OR_RETURN(std::vector<Tensor> values, cpu::evaluate_on_host(graph, node));
  for (size_t i = 0; i < node.outputs.size(); ++i)
    if (node.outputs[i] != kNoValue)
      graph.value(node.outputs[i]).constant = std::make_shared<const Tensor>(std::move(values[i]));
  return Status::ok();
}

Status infer_node(Graph& graph, NodeId id, MemoryBudget* budget) {
  const Node& node = graph.node(id);
  const OpSchema* schema = find_op_schema(node.domain, node.op_type);
  if (schema == nullptr) return unsupported(fmt::format("{} is not a supported op", describe_node(node)));
  STRIDER_RETURN_IF_ERROR(check_inputs_typed(graph, node));
  STRIDER_RETURN_IF_ERROR(check_node_signature(graph, node));
  InferContext context(graph, id);
  Status inferred = schema->infer(context);
  if (!inferred.is_ok()) return inferred.with_context(describe_node(node));
  STRIDER_RETURN_IF_ERROR(check_outputs(graph, node));
  if (all_outputs_constant(graph, node) || !all_inputs_constant(graph, node) || expands_as_function(node)) return Status::ok();
  Status folded = fold(graph, id, budget);
  if (!folded.is_ok()) return folded.with_context(describe_node(node)).with_context("while folding constants");
  return Status::ok();
}

// Infers and folds the nodes from `first` on, inlining control flow as it goes; the id of
// the first node that needs values known only at run time, or kNoNode.
Result<NodeId> infer_from(Graph& graph, NodeId first, MemoryBudget* budget) {
  for (NodeId id = first; id < graph.num_nodes(); ++id) {
    const Node& node = graph.node(id);
    if (is_control_flow(node)) {
      auto infer_appended = [budget](Graph& g, NodeId from) -> Result<bool> {
        STRIDER_ASSIGN_OR_RETURN(NodeId stop, infer_from(g, from, budget));
        return stop == kNoNode;
      };
      Result<bool> inlined = guard(describe_node(node), [&] { return inline_control_flow(graph, id, infer_appended); });
      if (!inlined.is_ok()) return inlined.status();
      if (!*inlined) return id;
      --id;  // the body's nodes now start at id
      continue;
    }
    if (has_data_dependent_shape(graph, node) && !all_inputs_constant(graph, node)) return id;
    STRIDER_RETURN_IF_ERROR(guard(describe_node(node), [&] { return infer_node(graph, id, budget); }));
  }
  return kNoNode;
}

}  // namespace

Status infer_and_fold(Graph& graph, MemoryBudget* budget, NodeId* split_at) {
  if (split_at) *split_at = kNoNode;
  STRIDER_ASSIGN_OR_RETURN(NodeId stop, infer_from(graph, 0, budget));
  if (stop != kNoNode) {
    const Node& node = graph.node(stop);
    if (!split_at)
      return unsupported(fmt::format("{}: {} values known only when it runs", describe_node(node),
                                     is_control_flow(node) ? "what it runs depends on" : "its output shape depends on"));
    *split_at = stop;
    return check_inputs_typed(graph, node);
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
