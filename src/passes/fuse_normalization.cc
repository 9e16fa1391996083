#include "passes/fuse_normalization.h"

#include <algorithm>
#include <optional>
#include <unordered_set>

#include "ops/op_registry.h"
#include "ops/shape_ops.h"
#include "passes/replace_pattern.h"

namespace strider {
namespace {

bool norm_dtype(DType t) { return t == DType::kF32 || t == DType::kBF16 || t == DType::kF16; }

// One found pattern: the nodes it removes (the last is the sink, whose place the fused
// node takes), x, the weight (kNoValue: none), epsilon and the first normalized axis.
struct RmsMatch {
  std::vector<NodeId> nodes;
  ValueId x = kNoValue, weight = kNoValue;
  float epsilon = 0;
  int64_t axis = 0;
};

class RmsNormMatcher {
 public:
  explicit RmsNormMatcher(const Graph& g) : g_(g), consumers_(g.consumers()), outputs_(g.outputs().begin(), g.outputs().end()) {}

  // The pattern whose ReduceMean is `mean_id`, if every piece of it is there.
  std::optional<RmsMatch> match(NodeId mean_id) const {
    RmsMatch m;
    const Node& mean = g_.node(mean_id);
    if (!onnx_node(mean, "ReduceMean", 1) || !internal(mean.outputs[0])) return std::nullopt;
    const NodeId square_id = g_.value(mean.inputs[0]).producer;
    if (square_id == kNoNode || !internal(mean.inputs[0])) return std::nullopt;
    m.x = squared_value(g_.node(square_id));
    if (m.x == kNoValue || !trailing_axes(mean, m)) return std::nullopt;
    m.nodes = {square_id, mean_id};
    // Add(eps) -> Sqrt.
    const NodeId add_id = sole_reader(mean.outputs[0]);
    if (add_id == kNoNode || !onnx_node(g_.node(add_id), "Add", 2)) return std::nullopt;
    const Node& add = g_.node(add_id);
    const ValueId eps = add.inputs[0] == mean.outputs[0] ? add.inputs[1] : add.inputs[0];
    std::optional<float> epsilon = scalar_constant(eps);
    if (!epsilon || !(*epsilon >= 0) || !internal(add.outputs[0])) return std::nullopt;
    m.epsilon = *epsilon;
    const NodeId sqrt_id = sole_reader(add.outputs[0]);
    if (sqrt_id == kNoNode || !onnx_node(g_.node(sqrt_id), "Sqrt", 1)) return std::nullopt;
    m.nodes.insert(m.nodes.end(), {add_id, sqrt_id});
    const ValueId normalized = divide_by_root(g_.node(sqrt_id).outputs[0], m);
    if (normalized == kNoValue) return std::nullopt;
    take_weight(normalized, m);
    return valid(m) ? std::optional<RmsMatch>(std::move(m)) : std::nullopt;
  }

 private:
  static bool onnx_node(const Node& n, std::string_view op, size_t inputs) {
    return n.in_default_domain() && n.op_type == op && n.inputs.size() == inputs &&
           n.outputs.size() == 1 && n.outputs[0] != kNoValue;
  }

  // A value read only by one node, not a graph output: one the pattern may remove.
  bool internal(ValueId v) const { return v != kNoValue && !outputs_.count(v) && consumers_[size_t(v)].size() == 1; }
  NodeId sole_reader(ValueId v) const { return internal(v) ? consumers_[size_t(v)][0] : kNoNode; }

  std::optional<float> scalar_constant(ValueId v) const {
    if (v == kNoValue) return std::nullopt;
    const Value& value = g_.value(v);
    if (!value.is_constant() || value.constant->num_elements() != 1 || !is_floating(value.dtype)) return std::nullopt;
    return float(value.constant->element_as_double(0));
  }

  // x, if `n` is Pow(x, 2) or Mul(x, x).
  ValueId squared_value(const Node& n) const {
    if (onnx_node(n, "Mul", 2) && n.inputs[0] == n.inputs[1]) return n.inputs[0];
    if (onnx_node(n, "Pow", 2) && scalar_constant(n.inputs[1]) == 2.0f) return n.inputs[0];
    return kNoValue;
  }

  // The ReduceMean keeps its dims and reduces the last axes (from m.axis on), all of them.
  bool trailing_axes(const Node& mean, RmsMatch& m) const {
    Result<ReduceParams> r = resolve_reduce(NodeInputs(g_, mean));
    const int64_t rank = int64_t(g_.value(m.x).shape.size());
    if (!r.is_ok() || !r->keepdims || r->noop || r->axes.empty() || rank == 0) return false;
    for (size_t i = 0; i < r->axes.size(); ++i)
      if (r->axes[i] != rank - int64_t(r->axes.size()) + int64_t(i)) return false;
    m.axis = r->axes.front();
    return true;
  }

  // x / s, x * (1 / s) or x * Reciprocal(s) for the root s: the normalized value.
  ValueId divide_by_root(ValueId s, RmsMatch& m) const {
    const NodeId id = sole_reader(s);
    if (id == kNoNode) return kNoValue;
    const Node& n = g_.node(id);
    m.nodes.push_back(id);
    if (onnx_node(n, "Div", 2) && n.inputs[1] == s) {
      if (n.inputs[0] == m.x) return n.outputs[0];
      if (scalar_constant(n.inputs[0]) != 1.0f) return kNoValue;
    } else if (!onnx_node(n, "Reciprocal", 1)) {
      return kNoValue;
    }
    const NodeId mul_id = sole_reader(n.outputs[0]);
    if (mul_id == kNoNode || !onnx_node(g_.node(mul_id), "Mul", 2)) return kNoValue;
    const Node& mul = g_.node(mul_id);
    const ValueId other = mul.inputs[0] == n.outputs[0] ? mul.inputs[1] : mul.inputs[0];
    if (other != m.x) return kNoValue;
    m.nodes.push_back(mul_id);
    return mul.outputs[0];
  }

  // Mul(normalized, w) whose w broadcasts over the normalized dims alone joins as the scale.
  void take_weight(ValueId normalized, RmsMatch& m) const {
    const NodeId id = sole_reader(normalized);
    if (id == kNoNode || !onnx_node(g_.node(id), "Mul", 2)) return;
    const Node& mul = g_.node(id);
    const ValueId w = mul.inputs[0] == normalized ? mul.inputs[1] : mul.inputs[0];
    if (w == normalized) return;
    const Shape& ws = g_.value(w).shape;
    size_t lead = 0;
    while (lead < ws.size() && ws[lead] == 1) ++lead;
    const int64_t rank = int64_t(g_.value(m.x).shape.size());
    if (int64_t(ws.size() - lead) > rank - m.axis) return;  // w would broadcast x's outer dims
    // Leading 1s past the normalized rank: the kernel's scale broadcasts to those dims only,
    // so a constant one is given without them (fuse_rms_norm); a computed one stays apart.
    if (int64_t(ws.size()) > rank - m.axis && !g_.value(w).is_constant()) return;
    m.weight = w;
    m.nodes.push_back(id);
  }

  // Types and shapes: elementwise values have x's dtype and shape; the weight x's dtype.
  bool valid(const RmsMatch& m) const {
    const Value& x = g_.value(m.x);
    if (!norm_dtype(x.dtype) || !x.has_shape) return false;
    for (NodeId n : m.nodes)
      if (g_.value(g_.node(n).outputs[0]).dtype != x.dtype) return false;
    const Value& out = g_.value(g_.node(m.nodes.back()).outputs[0]);
    if (out.shape != x.shape) return false;
    if (m.weight != kNoValue) {
      const Value& w = g_.value(m.weight);
      if (w.dtype != x.dtype) return false;
      for (NodeId n : m.nodes)  // the weight must exist before the pattern's last node
        if (w.producer == n) return false;
    }
    return true;
  }

  const Graph& g_;
  std::vector<std::vector<NodeId>> consumers_;
  std::unordered_set<ValueId> outputs_;
};

// A constant of ones over the normalized dims, for a pattern with no weight.
Result<ValueId> ones_scale(Graph& graph, const RmsMatch& m, const std::string& name) {
  const Shape& shape = graph.value(m.x).shape;
  const Shape dims(shape.begin() + m.axis, shape.end());
  const DType dtype = graph.value(m.x).dtype;  // copied: add_value may move the values
  STRIDER_ASSIGN_OR_RETURN(Tensor ones, Tensor::create(DType::kF32, dims));
  std::fill(ones.data<float>(), ones.data<float>() + ones.num_elements(), 1.0f);
  STRIDER_ASSIGN_OR_RETURN(Tensor typed, convert_float_tensor(ones, dtype));
  STRIDER_ASSIGN_OR_RETURN(ValueId id, graph.add_value(name));
  Value& v = graph.value(id);
  v.has_type = v.has_shape = true;
  v.dtype = dtype;
  v.shape = dims;
  v.constant = std::make_shared<const Tensor>(std::move(typed));
  return id;
}

// The constant weight without leading 1s past the normalized rank: [1, 1, D] -> [D].
Result<ValueId> squeezed_weight(Graph& graph, const RmsMatch& m, const std::string& name) {
  const Value& w = graph.value(m.weight);  // read before add_value, which may move the values
  const int64_t kept = int64_t(graph.value(m.x).shape.size()) - m.axis;
  if (int64_t(w.shape.size()) <= kept) return m.weight;
  const Shape dims(w.shape.end() - kept, w.shape.end());
  STRIDER_ASSIGN_OR_RETURN(Tensor t, Tensor::from_bytes(w.dtype, dims, std::span(w.constant->bytes(), w.constant->byte_size())));
  STRIDER_ASSIGN_OR_RETURN(ValueId id, graph.add_value(name));
  Value& v = graph.value(id);
  v.has_type = v.has_shape = true;
  v.dtype = t.dtype();
  v.shape = dims;
  v.constant = std::make_shared<const Tensor>(std::move(t));
  return id;
}

}  // namespace

Result<int> fuse_rms_norm(Graph& graph) {
  std::vector<RmsMatch> matches;
  {
    RmsNormMatcher matcher(graph);
    for (NodeId id = 0; id < graph.num_nodes(); ++id)
      if (graph.node(id).op_type == "ReduceMean")
        if (std::optional<RmsMatch> m = matcher.match(id)) matches.push_back(std::move(*m));
  }
  std::vector<PatternReplacement> replacements;
  for (const RmsMatch& m : matches) {
    const std::string name = graph.node(m.nodes.back()).name + ".rmsnorm";
    ValueId scale = m.weight;
    if (scale == kNoValue) {
      STRIDER_ASSIGN_OR_RETURN(scale, ones_scale(graph, m, name + ".scale"));
    } else {
      STRIDER_ASSIGN_OR_RETURN(scale, squeezed_weight(graph, m, name + ".scale"));
    }
    const Node& sink = graph.node(m.nodes.back());
    Node fused;
    fused.name = name;
    fused.op_type = "RMSNormalization";
    fused.opset = 23;
    fused.inputs = {m.x, scale};
    fused.outputs = sink.outputs;
    fused.expanded_from = sink.expanded_from;
    fused.attributes.set_int("axis", m.axis);
    fused.attributes.set_float("epsilon", m.epsilon);
    replacements.push_back({m.nodes, std::move(fused)});
  }
  replace_patterns(graph, std::move(replacements));
  return int(matches.size());
}

}  // namespace strider
