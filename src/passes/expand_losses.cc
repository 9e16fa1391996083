// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss as their ONNX function bodies
// (ops/function_ops.h has their meaning): the class each target names is read with
// GatherElements along C, weighted, masked where the target is ignore_index, and reduced.
// Ignored targets are replaced by class 0 before the gather, so the gather never reads
// outside the input for them.
#include <fmt/format.h>

#include "base/onnx_types.h"
#include "ops/function_ops.h"
#include "passes/body_writer.h"

namespace strider::expansion {
namespace {

// Unsqueeze and Squeeze of one axis by the node's opset (axes an attribute before 13).
Result<ValueId> one_axis(BodyWriter& w, const std::string& op, int opset, ValueId x, int64_t axis) {
  if (opset < 13) return w.op(op, {x}, ints_attr("axes", {axis}));
  STRIDER_ASSIGN_OR_RETURN(ValueId axes, w.ints({axis}));
  return w.op(op, {x, axes});
}

// The sum over every element, as a scalar (no axes: all of them, in every opset).
Result<ValueId> sum_all(BodyWriter& w, ValueId x) { return w.op("ReduceSum", {x}, int_attr("keepdims", 0)); }

// The loss of `log_prob` [N, C, d..] against `target` [N, d..], into `out`.
Status write_nll(BodyWriter& w, const Graph& g, const Node& node, ValueId log_prob, ValueId out) {
  STRIDER_ASSIGN_OR_RETURN(LossParams p, resolve_loss(NodeInputs(g, node)));
  const DType t = g.value(log_prob).dtype;
  STRIDER_ASSIGN_OR_RETURN(ValueId target, w.op("Cast", {node.inputs[1]}, int_attr("to", onnx_type_code(DType::kI64))));
  ValueId kept = kNoValue;  // bool [N, d..]: the target is not ignore_index
  if (p.has_ignore_index) {
    STRIDER_ASSIGN_OR_RETURN(ValueId ignore, w.constant(Tensor::from_values<int64_t>(DType::kI64, {}, std::vector<int64_t>{p.ignore_index})));
    STRIDER_ASSIGN_OR_RETURN(ValueId ignored, w.op("Equal", {target, ignore}));
    STRIDER_ASSIGN_OR_RETURN(kept, w.op("Not", {ignored}));
    STRIDER_ASSIGN_OR_RETURN(ValueId class0, w.constant(Tensor::from_values<int64_t>(DType::kI64, {}, std::vector<int64_t>{0})));
    STRIDER_ASSIGN_OR_RETURN(target, w.op("Where", {ignored, class0, target}));
  }
  STRIDER_ASSIGN_OR_RETURN(ValueId index, one_axis(w, "Unsqueeze", node.opset, target, 1));
  STRIDER_ASSIGN_OR_RETURN(ValueId taken, w.op("GatherElements", {log_prob, index}, int_attr("axis", 1)));
  STRIDER_ASSIGN_OR_RETURN(taken, one_axis(w, "Squeeze", node.opset, taken, 1));
  STRIDER_ASSIGN_OR_RETURN(ValueId loss, w.op("Neg", {taken}));
  ValueId weight = kNoValue;  // [N, d..]: each element's weight, 0 where ignored
  if (p.has_weight) {
    STRIDER_ASSIGN_OR_RETURN(weight, w.op("Gather", {node.inputs[2], target}, int_attr("axis", 0)));
  }
  if (kept != kNoValue) {
    STRIDER_ASSIGN_OR_RETURN(ValueId zero, w.floats(t, {}, {0.0f}));
    ValueId one = kNoValue;
    if (weight == kNoValue) {
      STRIDER_ASSIGN_OR_RETURN(one, w.floats(t, {}, {1.0f}));
    }
    STRIDER_ASSIGN_OR_RETURN(weight, w.op("Where", {kept, weight == kNoValue ? one : weight, zero}));
  }
  if (weight != kNoValue) {
    STRIDER_ASSIGN_OR_RETURN(loss, w.op("Mul", {loss, weight}));
  }
  if (p.reduction == "none") return w.op("Identity", {loss}, {}, out).status();
  if (p.reduction == "sum") return w.op("ReduceSum", {loss}, int_attr("keepdims", 0), out).status();
  if (weight == kNoValue) return w.op("ReduceMean", {loss}, int_attr("keepdims", 0), out).status();
  STRIDER_ASSIGN_OR_RETURN(ValueId total, sum_all(w, loss));
  STRIDER_ASSIGN_OR_RETURN(ValueId weights, sum_all(w, weight));
  return w.op("Div", {total, weights}, {}, out).status();
}

}  // namespace

Status expand_nll_loss(Graph& g, const Node& node, MemoryBudget* budget) {
  BodyWriter w(g, node, budget);
  return write_nll(w, g, node, node.inputs[0], node.outputs[0]);
}

// LogSoftmax along C, then the NLL of it. Before opset 13 LogSoftmax flattens from its
// axis on, so there C is moved last (where flattening from it is C alone) and back.
Status expand_softmax_cross_entropy(Graph& g, const Node& node, MemoryBudget* budget) {
  BodyWriter w(g, node, budget);
  const int64_t rank = int64_t(g.value(node.inputs[0]).shape.size());
  ValueId log_prob = kNoValue;
  if (node.opset >= 13 || rank == 2) {
    STRIDER_ASSIGN_OR_RETURN(log_prob, w.op("LogSoftmax", {node.inputs[0]}, int_attr("axis", 1)));
  } else {
    std::vector<int64_t> to_last{0}, back{0, rank - 1};
    for (int64_t d = 2; d < rank; ++d) to_last.push_back(d), back.push_back(d - 1);
    to_last.push_back(1);
    STRIDER_ASSIGN_OR_RETURN(ValueId last, w.op("Transpose", {node.inputs[0]}, ints_attr("perm", to_last)));
    STRIDER_ASSIGN_OR_RETURN(ValueId lp, w.op("LogSoftmax", {last}, int_attr("axis", rank - 1)));
    STRIDER_ASSIGN_OR_RETURN(log_prob, w.op("Transpose", {lp}, ints_attr("perm", back)));
  }
  if (node.outputs.size() > 1 && node.outputs[1] != kNoValue)
    STRIDER_RETURN_IF_ERROR(w.op("Identity", {log_prob}, {}, node.outputs[1]).status());
  return write_nll(w, g, node, log_prob, node.outputs[0]);
}

}  // namespace strider::expansion
