#include "passes/inline_control_flow.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "strider/printable.h"

namespace strider {
namespace {

// Appends a body's nodes (and the nodes that bind it) to a graph, for one control-flow node.
class Inliner {
 public:
  Inliner(Graph& graph, const Node& node) : g_(graph), node_(node) {
    const std::vector<std::string> names = implicit_input_names(node);
    explicit_inputs_ = node.inputs.size() - names.size();
    for (size_t k = 0; k < names.size(); ++k) outer_[names[k]] = node.inputs[explicit_inputs_ + k];
    opset_ = g_.opsets().count("") ? g_.opsets().at("") : node.opset;
  }

  size_t explicit_inputs() const { return explicit_inputs_; }
  ValueId input(size_t i) const { return i < explicit_inputs_ ? node_.inputs[i] : kNoValue; }

  Result<const Subgraph*> body(const std::string& attribute) const {
    const Attribute* a = node_.attributes.find(attribute);
    if (a == nullptr || !a->graph)
      return invalid_model(fmt::format("{} has no graph attribute '{}'", describe_node(node_), attribute));
    return a->graph.get();
  }

  // Appends `body`'s nodes with its formal inputs bound to `formals`; its outputs' values.
  Result<std::vector<ValueId>> run(const Subgraph& body, const std::vector<ValueId>& formals, const std::string& scope) {
    const Graph& b = body.graph;
    if (formals.size() != b.inputs().size())
      return invalid_model(fmt::format("{}: its body has {} inputs where the op gives it {}", describe_node(node_),
                                       b.inputs().size(), formals.size()));
    std::vector<ValueId> map(size_t(b.num_values()), kNoValue);
    for (size_t k = 0; k < formals.size(); ++k) map[size_t(b.inputs()[k])] = formals[k];
    for (ValueId v = 0; v < b.num_values(); ++v) {
      const Value& value = b.value(v);
      if (map[size_t(v)] != kNoValue || value.producer != kNoNode) continue;
      if (value.is_constant()) {
        STRIDER_ASSIGN_OR_RETURN(map[size_t(v)], new_value(scope + "/" + value.name));
        Value& copy = g_.value(map[size_t(v)]);
        copy.has_type = copy.has_shape = true;
        copy.dtype = value.dtype;
        copy.shape = value.shape;
        copy.constant = value.constant;
      } else if (auto it = outer_.find(value.name); it != outer_.end()) {
        map[size_t(v)] = it->second;
      } else if (std::find(b.inputs().begin(), b.inputs().end(), v) == b.inputs().end()) {
        return internal_error(fmt::format("{}: body value '{}' is bound to nothing", describe_node(node_),
                                          printable(value.name)));
      }
    }
    for (NodeId n = 0; n < b.num_nodes(); ++n) {
      Node copy = b.node(n);
      copy.name = scope + "/" + copy.name;
      for (ValueId& in : copy.inputs)
        if (in != kNoValue) in = map[size_t(in)];
      for (ValueId& out : copy.outputs) {
        if (out == kNoValue) continue;
        STRIDER_ASSIGN_OR_RETURN(ValueId added, new_value(scope + "/" + b.value(out).name));
        map[size_t(out)] = added;
        out = added;
      }
      STRIDER_RETURN_IF_ERROR(append(std::move(copy)));
    }
    std::vector<ValueId> outputs;
    for (ValueId out : b.outputs()) outputs.push_back(map[size_t(out)]);
    return outputs;
  }

  Result<ValueId> op(const std::string& op_type, std::vector<ValueId> inputs, AttributeMap attributes = {},
                     ValueId into = kNoValue) {
    if (into == kNoValue) {
      STRIDER_ASSIGN_OR_RETURN(into, new_value(node_.name + "/" + op_type));
    }
    Node node;
    node.name = unique_node_name(node_.name + "/" + op_type);
    node.op_type = op_type;
    node.opset = opset_;
    node.inputs = std::move(inputs);
    node.outputs = {into};
    node.attributes = std::move(attributes);
    STRIDER_RETURN_IF_ERROR(append(std::move(node)));
    return into;
  }
  Result<ValueId> scalar(int64_t v) {
    return constant(Tensor::from_values<int64_t>(DType::kI64, {}, std::span<const int64_t>(&v, 1)));
  }
  Result<ValueId> truth() {
    const bool yes = true;
    return constant(Tensor::from_values<bool>(DType::kBool, {}, std::span<const bool>(&yes, 1)));
  }
  // x with a new dim of size 1 at `axis` (negative: from the end of the result).
  Result<ValueId> unsqueeze(ValueId x, int64_t axis) {
    if (opset_ >= 13) {
      STRIDER_ASSIGN_OR_RETURN(ValueId axes, constant(Tensor::from_values<int64_t>(DType::kI64, {1}, std::span<const int64_t>(&axis, 1))));
      return op("Unsqueeze", {x, axes});
    }
    AttributeMap a;
    a.set_ints("axes", {axis});
    return op("Unsqueeze", {x}, std::move(a));
  }
  Result<ValueId> gather(ValueId x, int64_t index, int64_t axis) {
    STRIDER_ASSIGN_OR_RETURN(ValueId i, scalar(index));
    AttributeMap a;
    a.set_int("axis", axis);
    return op("Gather", {x, i}, std::move(a));
  }
  // The values stacked along a new dim at `axis`.
  Result<ValueId> stack(const std::vector<ValueId>& values, int64_t axis, ValueId into = kNoValue) {
    std::vector<ValueId> parts;
    for (ValueId v : values) {
      STRIDER_ASSIGN_OR_RETURN(ValueId part, unsqueeze(v, axis));
      parts.push_back(part);
    }
    AttributeMap a;
    a.set_int("axis", axis);
    return op("Concat", std::move(parts), std::move(a), into);
  }
  Status bind(ValueId from, ValueId into) {
    if (into == kNoValue) return Status::ok();
    if (from == kNoValue) return invalid_model(fmt::format("{}: a body output it returns is never computed", describe_node(node_)));
    return op("Identity", {from}, {}, into).status();
  }

 private:
  Result<ValueId> constant(Tensor t) {
    STRIDER_ASSIGN_OR_RETURN(ValueId id, new_value(node_.name + "/constant"));
    Value& v = g_.value(id);
    v.has_type = v.has_shape = true;
    v.dtype = t.dtype();
    v.shape = t.shape();
    v.constant = std::make_shared<const Tensor>(std::move(t));
    return id;
  }
  // A value named `base`, or `base_k` for the first free k (counted on from the last k
  // used: unrolling asks for the same base thousands of times).
  Result<ValueId> new_value(const std::string& base) {
    std::string name = base;
    for (int& k = next_suffix_[base]; g_.find_value(name); ++k) name = fmt::format("{}_{}", base, k + 1);
    return g_.add_value(std::move(name));
  }
  std::string unique_node_name(const std::string& base) { return fmt::format("{}_{}", base, counter_++); }
  Status append(Node node) {
    if (g_.num_nodes() >= kMaxInlinedNodes)
      return unsupported(fmt::format("{}: inlining its bodies makes more than {} nodes", describe_node(node_),
                                     kMaxInlinedNodes));
    return g_.add_node(std::move(node)).status();
  }

  Graph& g_;
  const Node& node_;
  size_t explicit_inputs_ = 0;
  std::map<std::string, ValueId> outer_;
  int opset_ = 0;
  int counter_ = 0;
  std::map<std::string, int> next_suffix_;
};

// The single value of a constant condition; nullopt when it is not a constant.
Result<std::optional<bool>> constant_truth(const Graph& g, ValueId id) {
  if (id == kNoValue) return std::optional<bool>(true);  // an omitted condition is true
  const Value& v = g.value(id);
  if (!v.is_constant()) return std::optional<bool>();
  if (v.constant->num_elements() != 1)
    return invalid_model(fmt::format("condition '{}' has {} elements, not one", printable(v.name), v.constant->num_elements()));
  return std::optional<bool>(v.constant->element_as_double(0) != 0);
}

Result<bool> inline_if(Graph& g, NodeId id) {
  const Node node = g.node(id);
  Inliner in(g, node);
  const ValueId cond = in.input(0);
  if (cond == kNoValue) return invalid_model(fmt::format("{} has no condition", describe_node(node)));
  if (!g.value(cond).is_constant()) return false;
  if (g.value(cond).constant->num_elements() != 1)
    return invalid_model(fmt::format("{}: its condition has {} elements, not one", describe_node(node),
                                     g.value(cond).constant->num_elements()));
  STRIDER_ASSIGN_OR_RETURN(std::optional<bool> truth, constant_truth(g, cond));
  const bool taken = *truth;
  STRIDER_ASSIGN_OR_RETURN(const Subgraph* branch, in.body(taken ? "then_branch" : "else_branch"));
  g.release_outputs(id);
  const NodeId first = g.num_nodes();
  STRIDER_ASSIGN_OR_RETURN(std::vector<ValueId> outs, in.run(*branch, {}, node.name + (taken ? "/then" : "/else")));
  if (outs.size() != node.outputs.size())
    return invalid_model(fmt::format("{}: the branch taken has {} outputs, the node {}", describe_node(node), outs.size(),
                                     node.outputs.size()));
  for (size_t k = 0; k < outs.size(); ++k) STRIDER_RETURN_IF_ERROR(in.bind(outs[k], node.outputs[k]));
  STRIDER_RETURN_IF_ERROR(g.replace_with_appended(id, first));
  return true;
}

Result<bool> inline_loop(Graph& g, NodeId id, const InferAppended& infer) {
  const Node node = g.node(id);
  Graph trial = g;  // the unrolling may find it needs run-time values half-way
  Inliner in(trial, node);
  STRIDER_ASSIGN_OR_RETURN(const Subgraph* body, in.body("body"));
  const size_t carried = in.explicit_inputs() < 2 ? 0 : in.explicit_inputs() - 2;
  const size_t body_outputs = body->graph.outputs().size();
  if (body->graph.inputs().size() != 2 + carried || body_outputs < 1 + carried ||
      node.outputs.size() != body_outputs - 1)
    return invalid_model(fmt::format("{}: {} loop-carried inputs, but its body has {} inputs and {} outputs and the "
                                     "node {} outputs", describe_node(node), carried, body->graph.inputs().size(),
                                     body_outputs, node.outputs.size()));
  int64_t trip = INT64_MAX;
  if (ValueId m = in.input(0); m != kNoValue) {
    if (!g.value(m).is_constant()) return false;
    if (g.value(m).constant->num_elements() != 1)
      return invalid_model(fmt::format("{}: its trip count has {} elements, not one", describe_node(node),
                                       g.value(m).constant->num_elements()));
    trip = g.value(m).constant->element_as_int(0);
  }
  ValueId cond = in.input(1);
  std::vector<ValueId> state(node.inputs.begin() + 2, node.inputs.begin() + ptrdiff_t(2 + carried));
  for (size_t k = 0; k < state.size(); ++k)
    if (state[k] == kNoValue)  // an empty name: a loop-carried value is not optional
      return invalid_model(fmt::format("{}: its loop-carried input {} is missing", describe_node(node), k + 2));
  std::vector<std::vector<ValueId>> scans(body_outputs - 1 - carried);
  trial.release_outputs(id);
  const NodeId first = trial.num_nodes();
  for (int64_t i = 0; i < trip; ++i) {
    STRIDER_ASSIGN_OR_RETURN(std::optional<bool> go, constant_truth(trial, cond));
    if (!go) return false;
    if (!*go) break;
    if (i >= kMaxUnrolledSteps)
      return unsupported(fmt::format("{} runs more than {} iterations; strider unrolls loops", describe_node(node),
                                     kMaxUnrolledSteps));
    std::vector<ValueId> formals;
    STRIDER_ASSIGN_OR_RETURN(ValueId iteration, in.scalar(i));
    formals.push_back(iteration);
    if (cond == kNoValue) {
      STRIDER_ASSIGN_OR_RETURN(cond, in.truth());
    }
    formals.push_back(cond);
    formals.insert(formals.end(), state.begin(), state.end());
    const NodeId step = trial.num_nodes();
    STRIDER_ASSIGN_OR_RETURN(std::vector<ValueId> outs, in.run(*body, formals, fmt::format("{}/{}", node.name, i)));
    STRIDER_ASSIGN_OR_RETURN(bool inferred, infer(trial, step));
    if (!inferred) return false;
    cond = outs[0];
    std::copy(outs.begin() + 1, outs.begin() + ptrdiff_t(1 + carried), state.begin());
    for (size_t k = 0; k < scans.size(); ++k) scans[k].push_back(outs[1 + carried + k]);
  }
  for (size_t k = 0; k < carried; ++k) STRIDER_RETURN_IF_ERROR(in.bind(state[k], node.outputs[k]));
  for (size_t k = 0; k < scans.size(); ++k) {
    if (node.outputs[carried + k] == kNoValue) continue;
    if (scans[k].empty())
      return unsupported(fmt::format("{} runs no iteration, so its scan output {} has no known shape",
                                     describe_node(node), k));
    STRIDER_RETURN_IF_ERROR(in.stack(scans[k], 0, node.outputs[carried + k]).status());
  }
  STRIDER_RETURN_IF_ERROR(trial.replace_with_appended(id, first));
  g = std::move(trial);
  return true;
}

struct ScanAxes {
  std::vector<int64_t> input_axes, input_directions, output_axes, output_directions;
};

// The scan axis of each input (negative counted from the end) and the steps they share.
Result<int64_t> scan_extent(const Graph& g, const Node& node, const std::vector<ValueId>& xs, const ScanAxes& axes,
                            std::vector<int64_t>& axis) {
  int64_t steps = -1;
  axis.assign(xs.size(), 0);
  for (size_t j = 0; j < xs.size(); ++j) {
    const Value& x = g.value(xs[j]);
    const int64_t rank = int64_t(x.shape.size());
    axis[j] = j < axes.input_axes.size() ? axes.input_axes[j] : 0;
    if (axis[j] < 0) axis[j] += rank;
    if (!x.has_shape || axis[j] < 0 || axis[j] >= rank)
      return invalid_model(fmt::format("{}: scan input {} {} has no axis {}", describe_node(node), j,
                                       g.describe_value(xs[j]), axis[j]));
    if (steps >= 0 && x.shape[size_t(axis[j])] != steps)
      return invalid_model(fmt::format("{}: its scan inputs have {} and {} steps", describe_node(node), steps,
                                       x.shape[size_t(axis[j])]));
    steps = x.shape[size_t(axis[j])];
  }
  if (steps <= 0) return unsupported(fmt::format("{} scans no step, so its outputs have no known shape", describe_node(node)));
  if (steps > kMaxUnrolledSteps)
    return unsupported(fmt::format("{} scans {} steps; strider unrolls at most {}", describe_node(node), steps,
                                   kMaxUnrolledSteps));
  return steps;
}

// One scan (opset 9's semantics), `steps` long along `axis` of inputs `xs`, from initial
// `states`: the final states and the stacked scan outputs.
Result<std::vector<ValueId>> scan_steps(Inliner& in, const Node& node, const Subgraph& body,
                                        std::vector<ValueId> states, const std::vector<ValueId>& xs,
                                        int64_t steps, const std::vector<int64_t>& axis, const ScanAxes& axes,
                                        const std::string& scope) {
  const size_t outputs = body.graph.outputs().size();
  if (body.graph.inputs().size() != states.size() + xs.size() || outputs < states.size())
    return invalid_model(fmt::format("{}: its body has {} inputs and {} outputs for {} states and {} scan inputs",
                                     describe_node(node), body.graph.inputs().size(), outputs, states.size(), xs.size()));
  std::vector<std::vector<ValueId>> ys(outputs - states.size());
  for (int64_t t = 0; t < steps; ++t) {
    std::vector<ValueId> formals = states;
    for (size_t j = 0; j < xs.size(); ++j) {
      const bool reverse = j < axes.input_directions.size() && axes.input_directions[j] == 1;
      STRIDER_ASSIGN_OR_RETURN(ValueId element, in.gather(xs[j], reverse ? steps - 1 - t : t, axis[j]));
      formals.push_back(element);
    }
    STRIDER_ASSIGN_OR_RETURN(std::vector<ValueId> outs, in.run(body, formals, fmt::format("{}/{}", scope, t)));
    std::copy(outs.begin(), outs.begin() + ptrdiff_t(states.size()), states.begin());
    for (size_t k = 0; k < ys.size(); ++k) ys[k].push_back(outs[states.size() + k]);
  }
  std::vector<ValueId> results = states;
  for (size_t k = 0; k < ys.size(); ++k) {
    if (k < axes.output_directions.size() && axes.output_directions[k] == 1) std::reverse(ys[k].begin(), ys[k].end());
    STRIDER_ASSIGN_OR_RETURN(ValueId stacked, in.stack(ys[k], k < axes.output_axes.size() ? axes.output_axes[k] : 0));
    results.push_back(stacked);
  }
  return results;
}

Result<ScanAxes> scan_axes(const Node& node) {
  ScanAxes axes;
  const AttributeMap& a = node.attributes;
  if (node.opset < 9) {
    STRIDER_ASSIGN_OR_RETURN(axes.input_directions, a.get_ints("directions", {}));
    return axes;
  }
  STRIDER_ASSIGN_OR_RETURN(axes.input_axes, a.get_ints("scan_input_axes", {}));
  STRIDER_ASSIGN_OR_RETURN(axes.input_directions, a.get_ints("scan_input_directions", {}));
  STRIDER_ASSIGN_OR_RETURN(axes.output_axes, a.get_ints("scan_output_axes", {}));
  STRIDER_ASSIGN_OR_RETURN(axes.output_directions, a.get_ints("scan_output_directions", {}));
  return axes;
}

Result<bool> inline_scan(Graph& g, NodeId id) {
  const Node node = g.node(id);
  Inliner in(g, node);
  STRIDER_ASSIGN_OR_RETURN(const Subgraph* body, in.body("body"));
  STRIDER_ASSIGN_OR_RETURN(int64_t scan_inputs, node.attributes.require_int("num_scan_inputs"));
  STRIDER_ASSIGN_OR_RETURN(ScanAxes axes, scan_axes(node));
  const size_t first_operand = node.opset < 9 ? 1 : 0;  // opset 8: sequence_lens first
  const size_t operands = in.explicit_inputs() - std::min(in.explicit_inputs(), first_operand);
  if (scan_inputs < 1 || size_t(scan_inputs) > operands)
    return invalid_model(fmt::format("{}: num_scan_inputs {} of {} inputs", describe_node(node), scan_inputs, operands));
  std::vector<ValueId> states, xs;
  for (size_t k = 0; k < operands; ++k) {
    const ValueId v = node.inputs[first_operand + k];
    if (v == kNoValue)  // an empty name: a state or a scan input is not optional
      return invalid_model(fmt::format("{}: its input {} is missing", describe_node(node), first_operand + k));
    (k < operands - size_t(scan_inputs) ? states : xs).push_back(v);
  }
  g.release_outputs(id);
  const NodeId first = g.num_nodes();
  std::vector<ValueId> results;
  if (node.opset >= 9) {
    std::vector<int64_t> axis;
    STRIDER_ASSIGN_OR_RETURN(int64_t steps, scan_extent(g, node, xs, axes, axis));
    STRIDER_ASSIGN_OR_RETURN(results, scan_steps(in, node, *body, states, xs, steps, axis, axes, node.name));
  } else {
    // Opset 8: dim 0 of every operand is a batch, scanned along dim 1, one scan per row.
    if (in.input(0) != kNoValue)
      return unsupported(fmt::format("{}: Scan-8 with sequence_lens is not supported", describe_node(node)));
    const Shape x0 = g.value(xs[0]).shape;  // a copy: the graph's values grow below
    if (!g.value(xs[0]).has_shape || x0.size() < 2)
      return invalid_model(fmt::format("{}: its scan input has no batch", describe_node(node)));
    ScanAxes batched = axes;
    batched.input_axes.assign(xs.size(), 1);  // the time axis, after the batch
    std::vector<int64_t> axis;
    STRIDER_ASSIGN_OR_RETURN(int64_t steps, scan_extent(g, node, xs, batched, axis));
    const std::vector<int64_t> row_axis(xs.size(), 0);
    std::vector<std::vector<ValueId>> rows(node.outputs.size());
    for (int64_t b = 0; b < x0[0]; ++b) {
      std::vector<ValueId> row_states, row_xs;
      for (ValueId s : states) {
        STRIDER_ASSIGN_OR_RETURN(ValueId v, in.gather(s, b, 0));
        row_states.push_back(v);
      }
      for (ValueId x : xs) {
        STRIDER_ASSIGN_OR_RETURN(ValueId v, in.gather(x, b, 0));
        row_xs.push_back(v);
      }
      STRIDER_ASSIGN_OR_RETURN(std::vector<ValueId> row,
                               scan_steps(in, node, *body, row_states, row_xs, steps, row_axis, axes,
                                          fmt::format("{}/{}", node.name, b)));
      for (size_t k = 0; k < row.size() && k < rows.size(); ++k) rows[k].push_back(row[k]);
    }
    for (std::vector<ValueId>& r : rows) {
      if (r.empty()) return unsupported(fmt::format("{} has an empty batch", describe_node(node)));
      STRIDER_ASSIGN_OR_RETURN(ValueId stacked, in.stack(r, 0));
      results.push_back(stacked);
    }
  }
  if (results.size() != node.outputs.size())
    return invalid_model(fmt::format("{}: its body gives {} results for {} outputs", describe_node(node), results.size(),
                                     node.outputs.size()));
  for (size_t k = 0; k < results.size(); ++k) STRIDER_RETURN_IF_ERROR(in.bind(results[k], node.outputs[k]));
  STRIDER_RETURN_IF_ERROR(g.replace_with_appended(id, first));
  return true;
}

}  // namespace

bool is_control_flow(const Node& node) {
  return node.in_default_domain() &&
         (node.op_type == "If" || node.op_type == "Loop" || node.op_type == "Scan");
}

Result<bool> inline_control_flow(Graph& graph, NodeId id, const InferAppended& infer) {
  const Node& node = graph.node(id);
  if (node.op_type == "If") return inline_if(graph, id);
  if (node.op_type == "Loop") return inline_loop(graph, id, infer);
  if (node.op_type == "Scan") return inline_scan(graph, id);
  return internal_error(fmt::format("{} is not control flow", describe_node(node)));
}

}  // namespace strider
