// Graph: the IR every pass and both interpreters work on.
//
// Values and nodes are addressed by dense integer ids into the graph's own vectors, so a
// Graph copies and moves like plain data. Nodes are kept in topological order (the
// importer checks this and the builder enforces it by construction). A Value is produced
// by at most one node; graph inputs and constants have no producer.
//
// Shapes are static once shape inference has run (src/ops/): every value then has a known
// dtype and a fully known shape. Before that, an unknown dimension is -1 and, for a graph
// input, `dim_params` may hold its symbolic name (ONNX dim_param).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/shape.h"
#include "ir/attributes.h"
#include "strider/dtype.h"
#include "strider/tensor.h"

namespace strider {

using ValueId = int32_t;
using NodeId = int32_t;
inline constexpr ValueId kNoValue = -1;
inline constexpr NodeId kNoNode = -1;

struct Value {
  std::string name;
  bool has_type = false;
  DType dtype = DType::kF32;
  bool has_shape = false;
  Shape shape;                         // -1 marks a dimension not yet known
  std::vector<std::string> dim_params;  // symbolic names of graph-input dims, or empty
  NodeId producer = kNoNode;
  // An initializer, a Constant's value, or a value folded at session creation.
  std::shared_ptr<const Tensor> constant;

  bool is_constant() const { return constant != nullptr; }
};

struct Node {
  std::string name;      // never empty: unnamed ONNX nodes get "<op_type>_<index>"
  std::string op_type;
  std::string domain;    // "" is the default ai.onnx domain
  int opset = 0;         // the version of `domain` the model imports
  std::vector<ValueId> inputs;   // kNoValue marks an omitted optional input
  std::vector<ValueId> outputs;  // kNoValue marks an omitted optional output
  AttributeMap attributes;
  // Set on the nodes passes/expand_functions.h writes: the op and name of the node whose
  // function body they are ("Attention 'attn'"); empty for the model's own nodes.
  std::string expanded_from;

  // The input at `index`, or kNoValue if absent or omitted.
  ValueId input(size_t index) const { return index < inputs.size() ? inputs[index] : kNoValue; }
  // The standard ONNX domain: the importer writes it as "", graphs built in code may spell it.
  bool in_default_domain() const { return domain.empty() || domain == "ai.onnx"; }
};

// "node 'conv_1' (Conv)" for messages; names and op types come from the model, so they
// are escaped and cut (base/printable.h).
std::string describe_node(const Node& node);

// Nodes appended after the graph's original nodes that replace node `replaced`
// (Graph::replace_with_appended_bodies).
struct AppendedBody {
  NodeId replaced = kNoNode;
  NodeId first = kNoNode;
  NodeId end = kNoNode;
};

class Graph {
 public:
  // Adds a value; names must be unique (an error if `name` exists).
  Result<ValueId> add_value(std::string name);
  // Appends a node after checking its inputs exist and its outputs have no producer yet.
  Result<NodeId> add_node(Node node);

  Value& value(ValueId id) { return values_.at(size_t(id)); }
  const Value& value(ValueId id) const { return values_.at(size_t(id)); }
  Node& node(NodeId id) { return nodes_.at(size_t(id)); }
  const Node& node(NodeId id) const { return nodes_.at(size_t(id)); }
  int32_t num_values() const { return int32_t(values_.size()); }
  int32_t num_nodes() const { return int32_t(nodes_.size()); }
  std::optional<ValueId> find_value(const std::string& name) const;

  // Graph inputs fed by the caller (initializers are not inputs) and graph outputs.
  std::vector<ValueId>& inputs() { return inputs_; }
  const std::vector<ValueId>& inputs() const { return inputs_; }
  std::vector<ValueId>& outputs() { return outputs_; }
  const std::vector<ValueId>& outputs() const { return outputs_; }
  // The graph outputs' types as the model declares them, in outputs() order (has_type
  // false where it declares none): what a caller is told before any shape is inferred,
  // symbolic dims included. strider infers its own and never trusts these.
  std::vector<Value>& declared_outputs() { return declared_outputs_; }
  const std::vector<Value>& declared_outputs() const { return declared_outputs_; }
  // Opset version per imported domain ("" = ai.onnx).
  std::map<std::string, int>& opsets() { return opsets_; }
  const std::map<std::string, int>& opsets() const { return opsets_; }

  // For each value, the nodes that read it (in node order; a node appears once per use).
  std::vector<std::vector<NodeId>> consumers() const;
  // Removes the nodes for which `remove` is true and renumbers the rest, keeping order.
  template <typename Pred>
  void remove_nodes_if(Pred remove) {
    std::vector<Node> kept;
    for (NodeId id = 0; id < num_nodes(); ++id)
      if (!remove(nodes_[size_t(id)])) kept.push_back(std::move(nodes_[size_t(id)]));
    nodes_ = std::move(kept);
    relink_producers();
  }
  // Inserts `node` before node `position` (its inputs must be defined before it) and
  // renumbers the nodes after it.
  Result<NodeId> insert_node(NodeId position, Node node);
  // Replaces node `id` by the nodes from `first_appended` to the end (appended after its
  // outputs were released with release_outputs): they move to its position, in order, in
  // one pass. They may read only values defined before `id` and each other's outputs.
  Status replace_with_appended(NodeId id, NodeId first_appended);
  // The same for many nodes in one pass (linear in the graph's size): each body's node
  // `replaced` goes and nodes [first, end) take its place, in order. Bodies are given in
  // order of `replaced`, their ranges are consecutive and cover every node appended after
  // the first body's `first`, and each `replaced` lies before that.
  Status replace_with_appended_bodies(const std::vector<AppendedBody>& bodies);
  // Detaches node `id` from its outputs (they have no producer until another node writes them).
  void release_outputs(NodeId id);
  // "value 'x' (f32[1, 3])" for messages.
  std::string describe_value(ValueId id) const;

 private:
  void relink_producers();

  std::vector<Value> values_;
  std::vector<Node> nodes_;
  std::vector<ValueId> inputs_;
  std::vector<ValueId> outputs_;
  std::vector<Value> declared_outputs_;
  std::map<std::string, ValueId> by_name_;
  std::map<std::string, int> opsets_;
};

// The body of a graph attribute (If's then_branch and else_branch, Loop's and Scan's body).
// Its graph's inputs() are the formal inputs (they may be untyped); its other values with
// no producer and no constant are outer references: values of an enclosing graph, read by
// name (ONNX's lexical scoping). `outer` lists those names in first-use order.
//
// A node with subgraphs reads its outer references as ordinary inputs, after its own
// (implicit inputs, as ONNX Runtime calls them): the union of its subgraphs' `outer`, in
// attribute-name order, first occurrence kept (implicit_input_names). So every pass that
// orders, plans or splits by node inputs sees what a body reads, and a body's names are
// bound positionally, which survives any renaming of the enclosing graph's values.
struct Subgraph {
  Graph graph;
  std::vector<std::string> outer;
};

// The names of `node`'s implicit inputs, in the order they follow its explicit inputs.
std::vector<std::string> implicit_input_names(const Node& node);
// How many of `node`'s inputs are its own (not implicit).
size_t explicit_input_count(const Node& node);

}  // namespace strider
