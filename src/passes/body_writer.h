// BodyWriter: how passes/expand_functions writes a function body into the graph, one node
// after another (internal to src/passes). The nodes are appended after the graph's last
// node; expand_functions then moves every body into the place of the node it replaces in
// one pass (Graph::replace_with_appended_bodies), so expanding a model whose recurrent
// layers unroll into thousands of nodes costs linear time, not an O(N) insert a node.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

#include "base/memory_budget.h"
#include "strider/printable.h"
#include "ir/graph.h"
#include "passes/lower_precision.h"

namespace strider::expansion {

// Appends the nodes of one function body to the graph, in order.
class BodyWriter {
 public:
  BodyWriter(Graph& graph, const Node& original, MemoryBudget* budget = nullptr)
      : g_(graph), original_(original), budget_(budget),
        origin_(fmt::format("{} '{}'", original.op_type, printable(original.name))) {}

  // Body nodes take the original node's opset, or `opset` if that is higher: a body that
  // needs an op newer than the node it replaces (ReverseSequence-10's GatherElements-11).
  void at_least_opset(int opset) { min_opset_ = opset; }

  // A node of the body; its output is `into` (an output of the original node) or a new value.
  Result<ValueId> op(const std::string& op_type, std::vector<ValueId> inputs, AttributeMap attributes = {},
                     ValueId into = kNoValue) {
    if (into == kNoValue) {
      STRIDER_ASSIGN_OR_RETURN(into, g_.add_value(unique_name(op_type + "_output")));
    }
    Node node;
    node.name = unique_name(op_type);
    node.op_type = op_type;
    node.opset = std::max(original_.opset, min_opset_);
    node.inputs = std::move(inputs);
    node.outputs = {into};
    node.attributes = std::move(attributes);
    node.expanded_from = origin_;
    STRIDER_RETURN_IF_ERROR(g_.add_node(std::move(node)).status());
    return into;
  }
  // Takes a constant's bytes from the session's budget before the body builds it: a mask
  // or table sized by the model's shapes can be large (the session keeps it).
  Status reserve(int64_t elements, DType dtype, std::string_view what) {
    if (budget_ == nullptr) return Status::ok();
    return budget_->reserve(elements * dtype_size(dtype), fmt::format("{} of {}", what, origin_));
  }
  Result<ValueId> constant(Tensor tensor) {
    STRIDER_ASSIGN_OR_RETURN(ValueId id, g_.add_value(unique_name("constant")));
    Value& v = g_.value(id);
    v.has_type = v.has_shape = true;
    v.dtype = tensor.dtype();
    v.shape = tensor.shape();
    v.constant = std::make_shared<const Tensor>(std::move(tensor));
    return id;
  }
  Result<ValueId> ints(std::vector<int64_t> values) {
    return constant(Tensor::from_values<int64_t>(DType::kI64, {int64_t(values.size())}, values));
  }
  // A tensor of `dtype` (floating) with the given float values.
  Result<ValueId> floats(DType dtype, Shape shape, const std::vector<float>& values) {
    STRIDER_ASSIGN_OR_RETURN(Tensor t, convert_float_tensor(Tensor::from_values<float>(DType::kF32, shape, values), dtype));
    return constant(std::move(t));
  }

 private:
  std::string unique_name(const std::string& what) {
    for (;; ++counter_) {
      std::string name = fmt::format("{}/{}_{}", original_.name, what, counter_);
      if (!g_.find_value(name)) {
        ++counter_;
        return name;
      }
    }
  }

  Graph& g_;
  const Node& original_;
  MemoryBudget* budget_;
  std::string origin_;
  int counter_ = 0;
  int min_opset_ = 0;
};

inline AttributeMap ints_attr(const std::string& name, std::vector<int64_t> v) {
  AttributeMap a;
  a.set_ints(name, std::move(v));
  return a;
}
inline AttributeMap int_attr(const std::string& name, int64_t v) {
  AttributeMap a;
  a.set_int(name, v);
  return a;
}


// The bodies written in files of their own.
Status expand_einsum(Graph& g, const Node& node, MemoryBudget* budget);
Status expand_nll_loss(Graph& g, const Node& node, MemoryBudget* budget);
Status expand_softmax_cross_entropy(Graph& g, const Node& node, MemoryBudget* budget);
Status expand_quantize_linear(Graph& g, const Node& node, MemoryBudget* budget);
Status expand_dequantize_linear(Graph& g, const Node& node, MemoryBudget* budget);
Status expand_dynamic_quantize_linear(Graph& g, const Node& node, MemoryBudget* budget);
Status expand_qlinear_matmul(Graph& g, const Node& node, MemoryBudget* budget);
Status expand_qlinear_conv(Graph& g, const Node& node, MemoryBudget* budget);
Status expand_conv_integer(Graph& g, const Node& node, MemoryBudget* budget);
Status expand_matmul_integer(Graph& g, const Node& node, MemoryBudget* budget);
Status expand_recurrent(Graph& g, const Node& node, MemoryBudget* budget);
Status expand_depth_to_space(Graph& g, const Node& node, MemoryBudget* budget);
Status expand_space_to_depth(Graph& g, const Node& node, MemoryBudget* budget);
Status expand_center_crop_pad(Graph& g, const Node& node, MemoryBudget* budget);
Status expand_max_unpool(Graph& g, const Node& node, MemoryBudget* budget);
Status expand_col2im(Graph& g, const Node& node, MemoryBudget* budget);
Status expand_reverse_sequence(Graph& g, const Node& node, MemoryBudget* budget);
Status expand_hardmax(Graph& g, const Node& node, MemoryBudget* budget);
Status expand_lrn(Graph& g, const Node& node, MemoryBudget* budget);
Status expand_lp_pool(Graph& g, const Node& node, MemoryBudget* budget);
Status expand_eye_like(Graph& g, const Node& node, MemoryBudget* budget);
Status expand_window_function(Graph& g, const Node& node, MemoryBudget* budget);
Status expand_conv_transpose(Graph& g, const Node& node, MemoryBudget* budget);
Status expand_dft(Graph& g, const Node& node, MemoryBudget* budget);
Status expand_stft(Graph& g, const Node& node, MemoryBudget* budget);

}  // namespace strider::expansion
