#include "exec/staged_session.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <set>

#include "passes/infer_shapes.h"
#include "strider/printable.h"

namespace strider {
namespace {

constexpr size_t kMaxAfterSessions = 8;

// `graph` with only the nodes `keep` marks, these inputs and outputs, and no node no
// output needs. Values keep their ids (and constants: they are shared, not copied).
Graph part_of(const Graph& graph, const std::vector<bool>& keep, std::vector<ValueId> inputs,
              std::vector<ValueId> outputs) {
  Graph part = graph;
  NodeId index = 0;
  part.remove_nodes_if([&](const Node&) { return !keep[size_t(index++)]; });
  part.inputs() = std::move(inputs);
  part.outputs() = std::move(outputs);
  part.declared_outputs().clear();
  for (ValueId id : part.outputs()) part.declared_outputs().push_back(part.value(id));
  remove_dead_nodes(part);
  return part;
}

std::vector<std::string> names_of(const Graph& graph, const std::vector<ValueId>& ids) {
  std::vector<std::string> names;
  for (ValueId id : ids) names.push_back(graph.value(id).name);
  return names;
}

// A graph of node `split` alone: its non-constant inputs are graph inputs.
Result<Graph> node_alone(const Graph& graph, NodeId split) {
  const Node& node = graph.node(split);
  Graph alone;
  alone.opsets() = graph.opsets();
  Node copy = node;
  std::map<ValueId, ValueId> renamed;
  auto add = [&](ValueId id) -> Result<ValueId> {
    if (auto it = renamed.find(id); it != renamed.end()) return it->second;
    STRIDER_ASSIGN_OR_RETURN(ValueId added, alone.add_value(graph.value(id).name));
    Value& v = alone.value(added);
    v = graph.value(id);
    v.producer = kNoNode;
    renamed[id] = added;
    return added;
  };
  for (ValueId& in : copy.inputs) {
    if (in == kNoValue) continue;
    STRIDER_ASSIGN_OR_RETURN(in, add(in));
    if (!alone.value(in).is_constant() &&
        std::find(alone.inputs().begin(), alone.inputs().end(), in) == alone.inputs().end())
      alone.inputs().push_back(in);
  }
  for (ValueId& out : copy.outputs) {
    if (out == kNoValue) continue;
    STRIDER_ASSIGN_OR_RETURN(out, add(out));
    alone.value(out).has_type = alone.value(out).has_shape = false;
    alone.outputs().push_back(out);
  }
  STRIDER_RETURN_IF_ERROR(alone.add_node(std::move(copy)).status());
  return alone;
}

SessionOptions part_options(const SessionOptions& options) {
  SessionOptions part = options;
  part.input_shapes.clear();  // the parts' inputs have their shapes already
  part.constant_inputs.clear();
  return part;
}

}  // namespace

Result<std::unique_ptr<StagedRun>> StagedRun::create(const Graph& graph, NodeId split, std::string why,
                                                     const SessionOptions& options,
                                                     const PlanOptions& plan_options,
                                                     std::shared_ptr<SessionResources> resources) {
  auto run = std::unique_ptr<StagedRun>(new StagedRun());
  run->options_ = part_options(options);
  run->plan_options_ = plan_options;
  run->resources_ = std::move(resources);
  run->input_names_ = names_of(graph, graph.inputs());
  run->output_names_ = names_of(graph, graph.outputs());
  const int nodes = graph.num_nodes();
  const std::set<ValueId> graph_inputs(graph.inputs().begin(), graph.inputs().end());
  // Values computed before the split that the split node, a later node or the caller reads.
  std::vector<bool> before(size_t(nodes), false), after(size_t(nodes), false);
  std::set<ValueId> crossing, after_inputs;
  for (NodeId id = 0; id < nodes; ++id) {
    before[size_t(id)] = id < split;
    after[size_t(id)] = id > split;
  }
  auto needs = [&](ValueId v, bool into_after) {
    if (v == kNoValue) return;
    const Value& value = graph.value(v);
    if (value.is_constant()) {
      run->constants_[value.name] = value.constant;
      return;
    }
    if (value.producer != kNoNode && value.producer < split) crossing.insert(v);
    if (into_after && (value.producer == kNoNode || value.producer <= split)) after_inputs.insert(v);
  };
  for (ValueId v : graph.node(split).inputs) needs(v, false);
  for (NodeId id = split + 1; id < nodes; ++id)
    for (ValueId v : graph.node(id).inputs) needs(v, true);
  for (ValueId v : graph.outputs()) needs(v, false);
  if (!crossing.empty()) {
    std::vector<ValueId> inputs;
    for (ValueId v : graph.inputs()) inputs.push_back(v);
    Graph part = part_of(graph, before, inputs, {crossing.begin(), crossing.end()});
    // Only the graph inputs the part reads (a session takes no input it does not use).
    std::set<ValueId> read;
    for (NodeId id = 0; id < part.num_nodes(); ++id)
      for (ValueId v : part.node(id).inputs) read.insert(v);
    for (ValueId v : part.outputs()) read.insert(v);
    std::erase_if(part.inputs(), [&](ValueId v) { return !read.count(v); });
    run->before_inputs_ = names_of(part, part.inputs());
    run->before_outputs_ = names_of(part, part.outputs());
    STRIDER_ASSIGN_OR_RETURN(run->before_session_, create_session(std::move(part), run->options_, plan_options,
                                                                  run->resources_));
  }
  STRIDER_ASSIGN_OR_RETURN(run->node_graph_, node_alone(graph, split));
  run->node_description_ = describe_node(graph.node(split));
  run->why_ = std::move(why);
  std::vector<ValueId> outputs_after;
  for (ValueId v : graph.outputs())
    if (graph.value(v).producer > split) outputs_after.push_back(v);
  if (!outputs_after.empty()) {
    run->after_graph_ = part_of(graph, after, {after_inputs.begin(), after_inputs.end()}, outputs_after);
    run->after_inputs_ = names_of(run->after_graph_, run->after_graph_.inputs());
    run->after_shape_inputs_ = shape_determining_inputs(run->after_graph_);
  }
  return run;
}

Result<std::vector<Tensor>> StagedRun::gather(const Env& env, const std::vector<std::string>& names) const {
  std::vector<Tensor> values;
  for (const std::string& name : names) {
    auto it = env.find(name);
    if (it == env.end()) return internal_error(fmt::format("staged run: value '{}' was not computed", printable(name)));
    values.push_back(it->second);
  }
  return values;
}

// Folds the split node's graph with the run's values as its constants.
Status StagedRun::run_node(Env& env) const {
  Graph graph = node_graph_;
  for (ValueId id : graph.inputs()) {
    Value& v = graph.value(id);
    auto it = env.find(v.name);
    if (it == env.end()) return internal_error(fmt::format("staged run: input '{}' was not computed", printable(v.name)));
    v.constant = std::make_shared<const Tensor>(it->second);
  }
  graph.inputs().clear();
  Status folded = infer_and_fold(graph);
  if (!folded.is_ok()) return folded.with_context("evaluating it on the host");
  for (ValueId id : graph.outputs()) {
    const Value& v = graph.value(id);
    if (!v.is_constant()) return internal_error(fmt::format("{} left '{}' unevaluated", node_description_, printable(v.name)));
    env[v.name] = *v.constant;
  }
  return Status::ok();
}

// The session after the split for this run's shapes (and shape-deciding values).
Result<Session*> StagedRun::after_session(const Env& env) {
  std::vector<Shape> shapes;
  std::vector<std::vector<std::byte>> keys;
  STRIDER_ASSIGN_OR_RETURN(std::vector<Tensor> inputs, gather(env, after_inputs_));
  for (const Tensor& t : inputs) shapes.push_back(t.shape());
  STRIDER_ASSIGN_OR_RETURN(std::vector<Tensor> deciding, gather(env, after_shape_inputs_));
  for (const Tensor& t : deciding) keys.emplace_back(t.bytes(), t.bytes() + t.byte_size());
  auto hit = std::find_if(afters_.begin(), afters_.end(), [&](const After& a) { return a.shapes == shapes && a.keys == keys; });
  if (hit != afters_.end()) {
    afters_.splice(afters_.begin(), afters_, hit);
    return afters_.front().session.get();
  }
  Graph graph = after_graph_;
  for (size_t i = 0; i < inputs.size(); ++i) {
    Value& v = graph.value(graph.inputs()[i]);
    v.dtype = inputs[i].dtype();
    v.shape = inputs[i].shape();
    v.has_type = v.has_shape = true;
  }
  SessionOptions options = options_;
  for (size_t i = 0; i < deciding.size(); ++i) options.constant_inputs[after_shape_inputs_[i]] = deciding[i];
  STRIDER_ASSIGN_OR_RETURN(std::unique_ptr<Session> session,
                           create_session(std::move(graph), options, plan_options_, resources_));
  afters_.push_front({std::move(shapes), std::move(keys), std::move(session)});
  if (afters_.size() > kMaxAfterSessions) afters_.pop_back();
  return afters_.front().session.get();
}

Result<std::vector<Tensor>> StagedRun::run(const std::vector<Tensor>& inputs) {
  Env env;
  for (size_t i = 0; i < inputs.size() && i < input_names_.size(); ++i) env[input_names_[i]] = inputs[i];
  for (const auto& [name, constant] : constants_) env[name] = *constant;
  if (before_session_) {
    STRIDER_ASSIGN_OR_RETURN(std::vector<Tensor> given, gather(env, before_inputs_));
    STRIDER_ASSIGN_OR_RETURN(std::vector<Tensor> computed, before_session_->run(given));
    for (size_t i = 0; i < computed.size(); ++i) env[before_outputs_[i]] = std::move(computed[i]);
  }
  STRIDER_RETURN_IF_ERROR(run_node(env));
  if (after_graph_.num_nodes() > 0 || !after_inputs_.empty()) {
    STRIDER_ASSIGN_OR_RETURN(Session * session, after_session(env));
    std::vector<std::string> names;
    for (const ValueInfo& info : session->inputs()) names.push_back(info.name);
    STRIDER_ASSIGN_OR_RETURN(std::vector<Tensor> given, gather(env, names));
    STRIDER_ASSIGN_OR_RETURN(std::vector<Tensor> computed, session->run(given));
    for (size_t i = 0; i < computed.size(); ++i) env[session->outputs()[i].name] = std::move(computed[i]);
  }
  return gather(env, output_names_);
}

std::vector<std::string> StagedRun::describe() const {
  std::vector<std::string> lines;
  lines.push_back(before_session_ ? fmt::format("before the split: a plan of {} input(s) and {} output(s)",
                                                before_inputs_.size(), before_outputs_.size())
                                  : "before the split: nothing");
  lines.push_back(fmt::format("split at {}: {}; evaluated on the host", node_description_, why_));
  lines.push_back(after_graph_.num_nodes() > 0
                      ? fmt::format("after the split: {} node(s), planned per shape on first use ({} plan(s) cached)",
                                    after_graph_.num_nodes(), afters_.size())
                      : "after the split: nothing");
  return lines;
}

}  // namespace strider
