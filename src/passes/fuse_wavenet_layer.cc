#include "passes/fuse_wavenet_layer.h"

#include <array>
#include <optional>
#include <unordered_set>

#include "ops/op_registry.h"
#include "ops/shape_ops.h"

namespace strider {
namespace {

bool is_one_of(const std::string& text, std::span<const std::string_view> forms) {
  for (std::string_view form : forms)
    if (text == form) return true;
  return false;
}

// `node`'s window along its one spatial axis (`x` its input, `w` its weights), where the
// node has one group and stride 1.
std::optional<WindowGeometry> unit_stride_window(const Graph& graph, const Node& node, const Shape& x, const Shape& w) {
  Result<int64_t> group = node.attributes.get_int("group", 1);
  if (!group.is_ok() || *group != 1 || x.size() != 3 || w.size() != 3) return std::nullopt;
  Result<WindowGeometry> g = resolve_window(NodeInputs(graph, node), std::span(x).subspan(2), std::span(w).subspan(2), false);
  if (!g.is_ok() || g->strides[0] != 1) return std::nullopt;
  return *g;
}

bool constant_or_absent(const Graph& graph, ValueId v) { return v == kNoValue || graph.value(v).is_constant(); }

// A 1x1 projection of G (C channels) to `out_channels` with no padding: its weights and
// bias constant, its output [N, out, T] of G's dtype.
bool is_projection_of(const Graph& graph, const Node& node, ValueId g, int64_t out_channels) {
  if (node.inputs.size() < 2 || node.inputs[0] != g || node.outputs.size() != 1) return false;
  const Value& gv = graph.value(g);
  const Value& w = graph.value(node.inputs[1]);
  if (!w.is_constant() || w.shape != Shape{out_channels, gv.shape[1], 1} || !constant_or_absent(graph, node.input(2)))
    return false;
  std::optional<WindowGeometry> window = unit_stride_window(graph, node, gv.shape, w.shape);
  const Value& y = graph.value(node.outputs[0]);
  return window && window->pads_begin[0] == 0 && window->pads_end[0] == 0 && y.dtype == gv.dtype &&
         y.shape == Shape{gv.shape[0], out_channels, gv.shape[2]};
}

// The residual: a FusedConv of G whose program adds the layer's input X.
bool is_residual(const Graph& graph, const Node& node, ValueId g, ValueId x) {
  static const std::array<std::string_view, 2> kForms = {"Add(x0, x1)", "Add(x1, x0)"};
  if (node.domain != kStriderDomain || node.op_type != kFusedConvOp || node.inputs.size() != 4 || node.inputs[3] != x)
    return false;
  Result<FusedProgram> program = read_fused_program_of(node, 2);
  return program.is_ok() && is_one_of(describe_fused_program(*program), kForms) &&
         is_projection_of(graph, node, g, graph.value(x).shape[1]);
}

// The skip: a plain Conv of G.
bool is_skip(const Graph& graph, const Node& node, ValueId g) {
  if (!node.domain.empty() || node.op_type != "Conv" || node.inputs.size() > 3 || node.inputs.size() < 2) return false;
  const Value& w = graph.value(node.inputs[1]);
  return w.shape.size() == 3 && is_projection_of(graph, node, g, w.shape[0]);
}

// The gate unit `node` is, with its padding before T, where it is one a layer may hold.
std::optional<std::pair<GatedConvUnit, WindowGeometry>> gate_unit(const Graph& graph, const Node& node) {
  static const std::array<std::string_view, 2> kForms = {"Mul(Tanh(x0), Sigmoid(x1))", "Mul(Sigmoid(x1), Tanh(x0))"};
  if (node.domain != kStriderDomain || node.op_type != kFusedGatedConvOp || node.inputs.size() < 2 ||
      node.inputs.size() > 3 || node.outputs.size() != 1 || node.inputs[0] == kNoValue)
    return std::nullopt;
  const Value& x = graph.value(node.inputs[0]);
  const Value& w = graph.value(node.inputs[1]);
  const Value& g = graph.value(node.outputs[0]);
  if (x.shape.size() != 3 || !w.is_constant() || !constant_or_absent(graph, node.input(2)) || g.shape != x.shape ||
      g.dtype != x.dtype || w.shape.size() != 3 || w.shape[0] != 2 * x.shape[1] || w.shape[1] != x.shape[1])
    return std::nullopt;
  std::optional<WindowGeometry> window = unit_stride_window(graph, node, x.shape, w.shape);
  Result<FusedProgram> program = read_fused_program_of(node, 2);
  if (!window || window->output[0] != x.shape[2] || !program.is_ok() ||
      !is_one_of(describe_fused_program(*program), kForms))
    return std::nullopt;
  return std::pair{GatedConvUnit{x.dtype, w.shape[2], x.shape[1], x.shape[1], positions_per_channel(x.shape)}, *window};
}

std::string folded_names(const Node& node) {
  Result<std::string> folded = node.attributes.get_string("nodes", node.name);
  return folded.is_ok() ? *folded : node.name;
}

// The layer of `gate` and its projections (either may be null).
Node make_layer(const Node& gate, const WindowGeometry& window, const Node* residual, const Node* skip, bool keep_g) {
  Node layer;
  layer.name = gate.name;
  layer.op_type = std::string(kFusedWaveNetLayerOp);
  layer.domain = std::string(kStriderDomain);
  layer.opset = gate.opset;
  layer.inputs = {gate.input(0), gate.input(1), gate.input(2),
                  residual ? residual->input(1) : kNoValue, residual ? residual->input(2) : kNoValue,
                  skip ? skip->input(1) : kNoValue, skip ? skip->input(2) : kNoValue};
  layer.outputs = {residual ? residual->outputs[0] : kNoValue, skip ? skip->outputs[0] : kNoValue,
                   keep_g ? gate.outputs[0] : kNoValue};
  std::string names = folded_names(gate);
  for (const Node* n : {residual, skip})
    if (n) names.append(",").append(folded_names(*n));
  layer.attributes.set_int("dilation", window.dilations[0]);
  layer.attributes.set_int("pad_begin", window.pads_begin[0]);
  layer.attributes.set_string("nodes", names);
  return layer;
}

}  // namespace

Result<int> fuse_wavenet_layers(Graph& graph, const std::function<bool(const WaveNetLayerShape&)>& pays) {
  const std::vector<std::vector<NodeId>> consumers = graph.consumers();
  const std::unordered_set<ValueId> outputs(graph.outputs().begin(), graph.outputs().end());
  std::unordered_set<NodeId> absorbed;
  std::vector<std::pair<NodeId, Node>> layers;
  for (NodeId id = 0; id < graph.num_nodes(); ++id) {
    const Node& gate = graph.node(id);
    auto unit = gate_unit(graph, gate);
    if (!unit) continue;
    const ValueId g = gate.outputs[0], x = gate.inputs[0];
    NodeId residual = kNoNode, skip = kNoNode;
    bool other_readers = outputs.count(g) != 0;
    for (NodeId r : consumers[size_t(g)]) {
      if (r == residual || r == skip) continue;  // a node reading G twice is one reader
      if (residual == kNoNode && !absorbed.count(r) && is_residual(graph, graph.node(r), g, x))
        residual = r;
      else if (skip == kNoNode && !absorbed.count(r) && is_skip(graph, graph.node(r), g))
        skip = r;
      else
        other_readers = true;
    }
    if (residual == kNoNode && skip == kNoNode) continue;
    const WaveNetLayerShape shape{unit->first, residual != kNoNode,
                                  skip == kNoNode ? 0 : graph.value(graph.node(skip).inputs[1]).shape[0]};
    if (pays && !pays(shape)) continue;
    const Node* res = residual == kNoNode ? nullptr : &graph.node(residual);
    const Node* sk = skip == kNoNode ? nullptr : &graph.node(skip);
    layers.emplace_back(id, make_layer(gate, unit->second, res, sk, other_readers));
    if (res) absorbed.insert(residual);
    if (sk) absorbed.insert(skip);
  }
  for (auto& [id, layer] : layers) graph.node(id) = std::move(layer);
  std::unordered_set<const Node*> removed;
  for (NodeId id : absorbed) removed.insert(&graph.node(id));
  graph.remove_nodes_if([&](const Node& n) { return removed.count(&n) != 0; });
  return int(layers.size());
}

}  // namespace strider
