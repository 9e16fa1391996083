// NodeInserter: how a rewriting pass that runs after shape inference (split_rotate_half,
// merge_sibling_matmuls; internal to src/passes) writes its nodes into the graph: one after
// another from a position (Graph::insert_node), each output typed as the pass says (no
// inference runs after these passes), names fresh under "<node>/<tag>_", and the opset and
// `expanded_from` of the node the rewrite stands in for.
#pragma once

#include <fmt/format.h>

#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace strider::rewriting {

class NodeInserter {
 public:
  NodeInserter(Graph& g, Node stands_for, NodeId position, std::string tag)
      : g_(g), stands_for_(std::move(stands_for)), position_(position), tag_(std::move(tag)) {}

  // A node with outputs `outputs` (values that exist and have no producer).
  Status node_into(const std::string& op, std::vector<ValueId> inputs, std::vector<ValueId> outputs,
                   AttributeMap attributes = {}) {
    Node n;
    n.name = fresh(op);
    n.op_type = op;
    n.opset = stands_for_.opset;
    n.inputs = std::move(inputs);
    n.outputs = std::move(outputs);
    n.attributes = std::move(attributes);
    n.expanded_from = stands_for_.expanded_from;
    return g_.insert_node(position_++, std::move(n)).status();
  }
  // A node of one new output of `dtype` and `shape`.
  Result<ValueId> node(const std::string& op, std::vector<ValueId> inputs, DType dtype, Shape shape,
                       AttributeMap attributes = {}) {
    STRIDER_ASSIGN_OR_RETURN(ValueId out, g_.add_value(fresh(op + "_output")));
    Value& v = g_.value(out);
    v.has_type = v.has_shape = true;
    v.dtype = dtype;
    v.shape = std::move(shape);
    STRIDER_RETURN_IF_ERROR(node_into(op, std::move(inputs), {out}, std::move(attributes)));
    return out;
  }
  Result<ValueId> constant(std::shared_ptr<const Tensor> tensor) {
    STRIDER_ASSIGN_OR_RETURN(ValueId id, g_.add_value(fresh("constant")));
    Value& v = g_.value(id);
    v.has_type = v.has_shape = true;
    v.dtype = tensor->dtype();
    v.shape = tensor->shape();
    v.constant = std::move(tensor);
    return id;
  }

  Graph& graph() { return g_; }

 private:
  std::string fresh(const std::string& what) {
    for (;; ++counter_) {
      std::string name = fmt::format("{}/{}_{}_{}", stands_for_.name, tag_, what, counter_);
      if (!g_.find_value(name)) return name;
    }
  }

  Graph& g_;
  Node stands_for_;
  NodeId position_;
  std::string tag_;
  int counter_ = 0;
};

}  // namespace strider::rewriting
