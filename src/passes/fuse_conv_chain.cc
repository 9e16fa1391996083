#include "passes/fuse_conv_chain.h"

#include <unordered_set>

#include "ops/conv_chain.h"
#include "ops/fused_elementwise.h"
#include "ops/op_registry.h"
#include "ops/shape_ops.h"

namespace strider {
namespace {

// A Conv, or a FusedConv whose program reads only the convolution, over a 2-D image in
// f32 or bf16 with constant weights: the parts a chain is made of.
bool is_chain_part(const Graph& graph, const Node& node) {
  const bool conv = node.in_default_domain() && node.op_type == "Conv";
  const bool fused = node.domain == kStriderDomain && node.op_type == kFusedConvOp;
  if (!(conv || fused) || node.inputs.size() < 2 || node.inputs.size() > 3 || node.outputs.size() != 1) return false;
  if (fused && !read_fused_program_of(node, 1).is_ok()) return false;
  const Value& x = graph.value(node.inputs[0]);
  const Value& w = graph.value(node.inputs[1]);
  return x.shape.size() == 4 && w.shape.size() == 4 && w.is_constant() &&
         (x.dtype == DType::kF32 || x.dtype == DType::kBF16);
}

// The window of a part over its input, or nothing when it does not resolve.
std::optional<WindowGeometry> window_of(const Graph& graph, const Node& node, const Shape& x, const Shape& w) {
  Result<WindowGeometry> g = resolve_window(NodeInputs(graph, node), std::span(x).subspan(2), std::span(w).subspan(2), false);
  return g.is_ok() ? std::optional(*g) : std::nullopt;
}

bool is_pointwise(const Graph& graph, const Node& node) {
  const Shape &x = graph.value(node.inputs[0]).shape, &w = graph.value(node.inputs[1]).shape;
  Result<int64_t> group = node.attributes.get_int("group", 1);
  std::optional<WindowGeometry> g = window_of(graph, node, x, w);
  if (!group.is_ok() || *group != 1 || w[2] != 1 || w[3] != 1 || !g) return false;
  for (size_t i = 0; i < 2; ++i)
    if (g->strides[i] != 1 || g->pads_begin[i] != 0 || g->pads_end[i] != 0 || g->dilations[i] != 1) return false;
  return true;
}

bool is_depthwise(const Graph& graph, const Node& node) {
  const Shape &x = graph.value(node.inputs[0]).shape, &w = graph.value(node.inputs[1]).shape;
  Result<int64_t> group = node.attributes.get_int("group", 1);
  std::optional<WindowGeometry> g = window_of(graph, node, x, w);
  return group.is_ok() && *group == x[1] && w[0] == x[1] && w[1] == 1 && w[2] == w[3] && g &&
         g->dilations[0] == 1 && g->dilations[1] == 1;
}

}  // namespace

Result<int> fuse_pointwise_depthwise(Graph& graph, const std::function<bool(int64_t)>& pays) {
  const std::vector<std::vector<NodeId>> consumers = graph.consumers();
  const std::unordered_set<ValueId> outputs(graph.outputs().begin(), graph.outputs().end());
  std::unordered_set<const Node*> absorbed;
  int fused = 0;
  for (NodeId id = 0; id < graph.num_nodes(); ++id) {
    const Node& pointwise = graph.node(id);
    if (!is_chain_part(graph, pointwise)) continue;
    const ValueId y = pointwise.outputs[0];
    if (outputs.count(y) || consumers[size_t(y)].size() != 1) continue;
    const NodeId reader = consumers[size_t(y)][0];
    const Node& depthwise = graph.node(reader);
    if (!is_chain_part(graph, depthwise) || depthwise.inputs[0] != y || !is_pointwise(graph, pointwise) ||
        !is_depthwise(graph, depthwise))
      continue;
    const Value& mid = graph.value(y);
    if (!pays(num_elements(mid.shape) * int64_t(dtype_size(mid.dtype)))) continue;
    Node chain = make_conv_chain(pointwise, depthwise);
    graph.node(reader) = std::move(chain);
    absorbed.insert(&pointwise);
    ++fused;
  }
  graph.remove_nodes_if([&](const Node& n) { return absorbed.count(&n) != 0; });
  return fused;
}

}  // namespace strider
