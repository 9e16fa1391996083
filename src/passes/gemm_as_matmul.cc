#include "passes/gemm_as_matmul.h"

#include <algorithm>

#include "ops/fused_elementwise.h"
#include "passes/node_inserter.h"

namespace strider {
namespace {

// Whether the Gemm's output is read by one elementwise node of its shape alone (BERT's
// pooler: Tanh), which the product could take as its epilogue. A Gemm read otherwise stays
// a Gemm: its kernel adds C as well as an epilogue would.
bool has_epilogue_reader(const Graph& g, const Node& gemm, const std::vector<std::vector<NodeId>>& consumers) {
  const ValueId y = gemm.outputs[0];
  const std::vector<ValueId>& outputs = g.outputs();
  if (consumers[size_t(y)].size() != 1 || std::find(outputs.begin(), outputs.end(), y) != outputs.end()) return false;
  const Node& reader = g.node(consumers[size_t(y)][0]);
  FusedOp op;
  return reader.in_default_domain() && reader.outputs.size() == 1 && fused_op_from_onnx(reader.op_type, &op) &&
         g.value(reader.outputs[0]).shape == g.value(y).shape && g.value(reader.outputs[0]).dtype == g.value(y).dtype;
}

bool is_linear_layer(const Graph& g, const Node& gemm) {
  if (gemm.op_type != "Gemm" || !gemm.in_default_domain() || gemm.outputs.size() != 1 || gemm.inputs.size() < 2)
    return false;
  auto alpha = gemm.attributes.get_float("alpha", 1.0f);
  auto beta = gemm.attributes.get_float("beta", 1.0f);
  auto trans_a = gemm.attributes.get_int("transA", 0);
  auto trans_b = gemm.attributes.get_int("transB", 0);
  if (!alpha.is_ok() || !beta.is_ok() || !trans_a.is_ok() || !trans_b.is_ok()) return false;
  const bool has_c = gemm.inputs.size() > 2 && gemm.inputs[2] != kNoValue;
  if (*alpha != 1.0f || (has_c && *beta != 1.0f) || *trans_a != 0 || (*trans_b != 0 && *trans_b != 1)) return false;
  const Value& a = g.value(gemm.inputs[0]);
  const Value& b = g.value(gemm.inputs[1]);
  const Value& y = g.value(gemm.outputs[0]);
  if (!a.has_shape || !b.has_shape || !y.has_shape || a.shape.size() != 2 || b.shape.size() != 2) return false;
  if (!is_floating(a.dtype) || b.dtype != a.dtype || y.dtype != a.dtype) return false;
  return !has_c || g.value(gemm.inputs[2]).dtype == a.dtype;
}

// Writes the product before node `id` and turns the Gemm into the Add of C (or into the
// MatMul itself where there is no C). Returns how many nodes were inserted before it.
Result<int> rewrite(Graph& g, NodeId id) {
  const Node gemm = g.node(id);
  rewriting::NodeInserter insert(g, gemm, id, "linear");
  // Copies: adding values below moves the graph's values.
  const DType dtype = g.value(gemm.inputs[0]).dtype;
  const int64_t rows = g.value(gemm.inputs[0]).shape[0];
  const Shape b = g.value(gemm.inputs[1]).shape;
  const Result<int64_t> trans = gemm.attributes.get_int("transB", 0);
  const bool trans_b = trans.is_ok() && *trans == 1;
  ValueId weights = gemm.inputs[1];
  if (trans_b) {
    AttributeMap perm;
    perm.set_ints("perm", {1, 0});
    STRIDER_ASSIGN_OR_RETURN(weights, insert.node("Transpose", {weights}, dtype, {b[1], b[0]}, perm));
  }
  const bool has_c = gemm.inputs.size() > 2 && gemm.inputs[2] != kNoValue;
  Node& last = g.node(id + (trans_b ? 1 : 0));
  if (!has_c) {
    last.op_type = "MatMul";
    last.inputs = {gemm.inputs[0], weights};
    last.attributes = {};
    return trans_b ? 1 : 0;
  }
  const Shape product_shape = {rows, trans_b ? b[0] : b[1]};
  STRIDER_ASSIGN_OR_RETURN(ValueId product, insert.node("MatMul", {gemm.inputs[0], weights}, dtype, product_shape));
  Node& sum = g.node(id + (trans_b ? 2 : 1));
  sum.op_type = "Add";
  sum.inputs = {product, gemm.inputs[2]};
  sum.attributes = {};
  return trans_b ? 2 : 1;
}

}  // namespace

Result<int> gemm_as_matmul(Graph& graph) {
  int rewritten = 0;
  std::vector<std::vector<NodeId>> consumers = graph.consumers();
  for (NodeId id = 0; id < graph.num_nodes(); ++id) {
    if (!is_linear_layer(graph, graph.node(id)) || !has_epilogue_reader(graph, graph.node(id), consumers)) continue;
    STRIDER_ASSIGN_OR_RETURN(int inserted, rewrite(graph, id));
    id += inserted;
    ++rewritten;
    consumers = graph.consumers();  // node ids after the insertions moved
  }
  return rewritten;
}

}  // namespace strider
