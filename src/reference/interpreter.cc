// The reference interpreter's driver: feeds the inputs, walks the nodes in graph order,
// dispatches each to its op function by (op_type, opset), and frees each intermediate
// value after its last reader unless every value is kept.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>

#include "base/shape.h"
#include "reference/op_support.h"
#include "reference/reference.h"

namespace strider {
namespace {

using ref::OpDefinition;
using OpTable = std::map<std::string, std::vector<const OpDefinition*>, std::less<>>;

const OpTable& op_table() {
  static const OpTable table = [] {
    OpTable t;
    for (std::span<const OpDefinition> family :
         {ref::elementwise_op_definitions(), ref::cast_compare_op_definitions(),
          ref::tensor_op_definitions(), ref::generator_op_definitions(),
          ref::linear_op_definitions(), ref::normalization_op_definitions(),
          ref::pool_op_definitions(), ref::resize_op_definitions(), ref::reduce_op_definitions(),
          ref::activation_op_definitions(), ref::norm_family_op_definitions(),
          ref::pad_tile_op_definitions(), ref::scatter_op_definitions(), ref::attention_op_definitions(),
          ref::loss_op_definitions(), ref::rearrange_op_definitions(),
          ref::quantize_op_definitions(), ref::recurrent_op_definitions(), ref::selection_op_definitions(),
          ref::control_flow_op_definitions(), ref::grid_op_definitions()})
      for (const OpDefinition& d : family) t[std::string(d.op_type)].push_back(&d);
    return t;
  }();
  return table;
}

const OpDefinition* find_definition(const Node& node) {
  if (!node.domain.empty() && node.domain != "ai.onnx") return nullptr;
  auto it = op_table().find(node.op_type);
  if (it == op_table().end()) return nullptr;
  for (const OpDefinition* d : it->second)
    if (node.opset >= d->first_opset && node.opset <= d->last_opset) return d;
  return nullptr;
}

Status check_input(const Value& value, const Tensor& tensor) {
  if (value.has_type && value.dtype != tensor.dtype())
    return invalid_argument(fmt::format("input '{}': got {}, expected {}", value.name,
                                        dtype_name(tensor.dtype()), dtype_name(value.dtype)));
  if (!value.has_shape) return Status::ok();
  if (value.shape.size() != tensor.shape().size())
    return invalid_argument(fmt::format("input '{}': got shape {}, expected rank {}", value.name,
                                        shape_to_string(tensor.shape()), value.shape.size()));
  for (size_t d = 0; d < value.shape.size(); ++d)
    if (value.shape[d] >= 0 && value.shape[d] != tensor.shape()[d])
      return invalid_argument(fmt::format("input '{}' dim {}: got {}, expected {}", value.name, d,
                                          tensor.shape()[d], value.shape[d]));
  return Status::ok();
}

// The value store of one evaluation: graph inputs, lazily widened constants, node outputs.
class ValueStore {
 public:
  explicit ValueStore(const Graph& graph) : graph_(graph), values_(size_t(graph.num_values())) {}

  Status feed(const std::map<std::string, Tensor>& inputs) {
    for (const auto& [name, tensor] : inputs) {
      std::optional<ValueId> id = graph_.find_value(name);
      bool is_input = id && std::find(graph_.inputs().begin(), graph_.inputs().end(), *id) !=
                                graph_.inputs().end();
      if (!is_input) return not_found(fmt::format("the graph has no input named '{}'", name));
      STRIDER_RETURN_IF_ERROR(check_input(graph_.value(*id), tensor));
      values_[size_t(*id)] = ref_from_tensor(tensor);
    }
    for (ValueId id : graph_.inputs())
      if (!values_[size_t(id)] && !graph_.value(id).is_constant())
        return invalid_argument(fmt::format("missing input '{}'", graph_.value(id).name));
    return Status::ok();
  }

  // The value of `id`, widening a constant on first use; nullptr if it has none yet.
  const RefTensor* get(ValueId id) {
    std::optional<RefTensor>& slot = values_[size_t(id)];
    if (!slot && graph_.value(id).is_constant()) slot = ref_from_tensor(*graph_.value(id).constant);
    return slot ? &*slot : nullptr;
  }
  void set(ValueId id, RefTensor value) { values_[size_t(id)] = std::move(value); }
  void release(ValueId id) { values_[size_t(id)].reset(); }
  std::optional<RefTensor>& slot(ValueId id) { return values_[size_t(id)]; }

 private:
  const Graph& graph_;
  std::vector<std::optional<RefTensor>> values_;
};

Result<std::vector<const RefTensor*>> node_inputs(const Graph& graph, const Node& node,
                                                  ValueStore& store) {
  std::vector<const RefTensor*> inputs;
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    ValueId id = node.inputs[i];
    if (id == kNoValue) {
      inputs.push_back(nullptr);
      continue;
    }
    const RefTensor* value = store.get(id);
    if (value == nullptr)
      return invalid_model(
          fmt::format("input {} '{}' has no value: it is not a graph input, a constant or the "
                      "output of an earlier node",
                      i, graph.value(id).name));
    inputs.push_back(value);
  }
  return inputs;
}

Status run_node(const Graph& graph, const Node& node, ValueStore& store) {
  const OpDefinition* definition = find_definition(node);
  if (definition == nullptr)
    return unsupported(
        fmt::format("op {}{}{} at opset {} is not implemented by the reference interpreter",
                    node.domain, node.domain.empty() ? "" : ".", node.op_type, node.opset));
  STRIDER_ASSIGN_OR_RETURN(std::vector<const RefTensor*> inputs, node_inputs(graph, node, store));
  STRIDER_ASSIGN_OR_RETURN(ref::OpOutputs outputs,
                           definition->evaluate(ref::OpContext(node, std::move(inputs))));
  for (size_t i = 0; i < node.outputs.size(); ++i) {
    ValueId id = node.outputs[i];
    if (id == kNoValue) continue;
    if (i >= outputs.size())
      return unsupported(
          fmt::format("output {} '{}' is not produced by the reference", i, graph.value(id).name));
    const Value& declared = graph.value(id);
    if (declared.has_type && declared.dtype != outputs[i].dtype)
      return invalid_model(fmt::format("output {} '{}' is computed as {} but declared {}", i,
                                       declared.name, dtype_name(outputs[i].dtype),
                                       dtype_name(declared.dtype)));
    store.set(id, std::move(outputs[i]));
  }
  return Status::ok();
}

// For each value, the index of the last node that reads it (-1 if none).
std::vector<NodeId> last_readers(const Graph& graph) {
  std::vector<NodeId> last(size_t(graph.num_values()), -1);
  for (NodeId n = 0; n < graph.num_nodes(); ++n)
    for (ValueId id : graph.node(n).inputs)
      if (id != kNoValue) last[size_t(id)] = n;
  return last;
}

// The nodes some graph output depends on. Only those run: a dead node may be as large as
// a model likes (strider drops it before planning, so no budget ever saw it).
std::vector<bool> live_nodes(const Graph& graph) {
  std::vector<bool> needed(size_t(graph.num_values()), false), live(size_t(graph.num_nodes()), false);
  for (ValueId id : graph.outputs()) needed[size_t(id)] = true;
  for (NodeId n = graph.num_nodes(); n-- > 0;) {
    const Node& node = graph.node(n);
    for (ValueId out : node.outputs) live[size_t(n)] = live[size_t(n)] || (out != kNoValue && needed[size_t(out)]);
    if (!live[size_t(n)]) continue;
    for (ValueId in : node.inputs)
      if (in != kNoValue) needed[size_t(in)] = true;
  }
  return live;
}

}  // namespace

bool reference_supports(const Node& node) { return find_definition(node) != nullptr; }

namespace {

// Runs the live nodes of `graph` on `store` (inputs already there) and returns its outputs;
// with `keep_all_values`, every value in `kept`.
Result<std::vector<RefTensor>> run_graph(const Graph& graph, ValueStore& store, bool keep_all_values,
                                         std::map<ValueId, RefTensor>* kept) {
  std::vector<NodeId> last_reader = last_readers(graph);
  std::vector<bool> is_output(size_t(graph.num_values()), false);
  for (ValueId id : graph.outputs()) is_output[size_t(id)] = true;
  std::vector<bool> live = live_nodes(graph);
  for (NodeId n = 0; n < graph.num_nodes(); ++n) {
    const Node& node = graph.node(n);
    if (!live[size_t(n)]) continue;
    Status status = run_node(graph, node, store);
    if (!status.is_ok()) return status.with_context(describe_node(node));
    if (keep_all_values) continue;
    for (ValueId id : node.inputs)
      if (id != kNoValue && last_reader[size_t(id)] == n && !is_output[size_t(id)])
        store.release(id);
  }
  std::vector<RefTensor> outputs;
  for (ValueId id : graph.outputs()) {
    const RefTensor* value = store.get(id);
    if (value == nullptr)
      return invalid_model(fmt::format("graph output '{}' has no value", graph.value(id).name));
    outputs.push_back(*value);
  }
  if (keep_all_values && kept)
    for (ValueId id = 0; id < graph.num_values(); ++id)
      if (std::optional<RefTensor>& slot = store.slot(id)) kept->emplace(id, std::move(*slot));
  return outputs;
}

}  // namespace

Result<ReferenceResult> evaluate_reference(const Graph& graph,
                                           const std::map<std::string, Tensor>& inputs,
                                           bool keep_all_values) {
  ValueStore store(graph);
  STRIDER_RETURN_IF_ERROR(store.feed(inputs));
  ReferenceResult result;
  STRIDER_ASSIGN_OR_RETURN(result.outputs, run_graph(graph, store, keep_all_values, &result.values));
  return result;
}

namespace ref {

Result<std::vector<RefTensor>> evaluate_body(const Subgraph& body, std::vector<RefTensor> formals,
                                             const std::map<std::string, const RefTensor*>& outer) {
  const Graph& graph = body.graph;
  if (formals.size() != graph.inputs().size())
    return invalid_model(fmt::format("its body has {} inputs where the op gives it {}", graph.inputs().size(),
                                     formals.size()));
  ValueStore store(graph);
  for (size_t k = 0; k < formals.size(); ++k) store.set(graph.inputs()[k], std::move(formals[k]));
  for (const std::string& name : body.outer) {
    auto it = outer.find(name);
    std::optional<ValueId> id = graph.find_value(name);
    if (it == outer.end() || !id) return internal_error(fmt::format("outer value '{}' is not bound", name));
    store.set(*id, *it->second);
  }
  return run_graph(graph, store, false, nullptr);
}

}  // namespace ref

}  // namespace strider
