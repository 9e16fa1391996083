#include "passes/split_rotary.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <unordered_set>

#include "passes/node_inserter.h"

namespace strider {
namespace {

// One rotate_half pattern: sum = Add(Mul(x, cos), Mul(Concat(Neg(x2), x1), sin)).
struct Rotary {
  NodeId sum = kNoNode;
  std::vector<NodeId> removed;  // the Neg, the Concat, both products and the sum
  ValueId x = kNoValue, x1 = kNoValue, x2 = kNoValue, cos = kNoValue, sin = kNoValue;
  int64_t half = 0;
};

class RotaryMatcher {
 public:
  explicit RotaryMatcher(const Graph& g) : g_(g), consumers_(g.consumers()), outputs_(g.outputs().begin(), g.outputs().end()) {}

  std::optional<Rotary> match(NodeId concat_id) const {
    const Node& concat = g_.node(concat_id);
    if (concat.op_type != "Concat" || !concat.in_default_domain() || concat.inputs.size() != 2) return std::nullopt;
    Rotary r;
    NodeId neg_id = kNoNode, rotated_product = kNoNode, direct_product = kNoNode;
    const Node* neg = producer(concat.inputs[0], "Neg", &neg_id);
    if (!neg || !internal(concat.outputs[0])) return std::nullopt;
    std::optional<std::pair<int64_t, int64_t>> second = slice_of_last(neg->inputs[0], &r.x);
    ValueId x_again = kNoValue;
    std::optional<std::pair<int64_t, int64_t>> first = slice_of_last(concat.inputs[1], &x_again);
    if (!first || !second || x_again != r.x) return std::nullopt;
    const Shape& shape = g_.value(r.x).shape;
    const int64_t width = shape.empty() ? 0 : shape.back();
    r.half = width / 2;
    if (width < 2 || width % 2 != 0 || *first != std::make_pair(int64_t(0), r.half) ||
        *second != std::make_pair(r.half, width) || !last_axis(concat, int64_t(shape.size())))
      return std::nullopt;
    r.x1 = concat.inputs[1];
    r.x2 = neg->inputs[0];
    // The rotated half times sin, added to x times cos.
    const Node* rotated = sole_reader(concat.outputs[0], "Mul", &rotated_product);
    if (!rotated) return std::nullopt;
    r.sin = other_input(*rotated, concat.outputs[0]);
    const Node* sum = sole_reader(rotated->outputs[0], "Add", &r.sum);
    if (!sum) return std::nullopt;
    const Node* direct = producer(other_input(*sum, rotated->outputs[0]), "Mul", &direct_product);
    if (!direct || !internal(direct->outputs[0])) return std::nullopt;
    r.cos = other_input(*direct, r.x);
    if (r.sin == kNoValue || r.cos == kNoValue || !fits(r, g_.value(sum->outputs[0]))) return std::nullopt;
    r.removed = {neg_id, concat_id, rotated_product, direct_product, r.sum};
    return r;
  }

 private:
  bool internal(ValueId v) const { return !outputs_.count(v) && consumers_[size_t(v)].size() == 1; }

  const Node* producer(ValueId v, std::string_view op, NodeId* id) const {
    if (v == kNoValue || !internal(v) || (*id = g_.value(v).producer) == kNoNode) return nullptr;
    const Node& n = g_.node(*id);
    return n.op_type == op && n.in_default_domain() && n.outputs.size() == 1 && n.inputs.size() == (op == "Neg" ? 1u : 2u)
               ? &n
               : nullptr;
  }
  const Node* sole_reader(ValueId v, std::string_view op, NodeId* id) const {
    if (!internal(v)) return nullptr;
    *id = consumers_[size_t(v)][0];
    const Node& n = g_.node(*id);
    return n.op_type == op && n.in_default_domain() && n.inputs.size() == 2 && n.outputs.size() == 1 ? &n : nullptr;
  }
  // The input of binary `n` that is not `v` (kNoValue if `v` is not one of them, or both).
  static ValueId other_input(const Node& n, ValueId v) {
    if (n.inputs.size() != 2 || n.inputs[0] == n.inputs[1]) return kNoValue;
    return n.inputs[0] == v ? n.inputs[1] : n.inputs[1] == v ? n.inputs[0] : kNoValue;
  }

  bool last_axis(const Node& concat, int64_t rank) const {
    auto axis = concat.attributes.get_int("axis", 0);
    return axis.is_ok() && rank > 0 && (*axis == -1 || *axis == rank - 1);
  }

  // `v` = Slice(data, start, end) along the last axis with step 1: *data and [start, end)
  // (end clamped to the axis), or nullopt.
  std::optional<std::pair<int64_t, int64_t>> slice_of_last(ValueId v, ValueId* data) const {
    const NodeId id = g_.value(v).producer;
    if (id == kNoNode) return std::nullopt;
    const Node& n = g_.node(id);
    if (n.op_type != "Slice" || !n.in_default_domain() || n.inputs.size() < 4) return std::nullopt;
    auto one = [&](size_t k) -> std::optional<int64_t> {
      const Value& c = g_.value(n.inputs[k]);
      if (!c.is_constant() || c.constant->num_elements() != 1 || is_floating(c.dtype)) return std::nullopt;
      return c.constant->element_as_int(0);
    };
    const Shape& in = g_.value(n.inputs[0]).shape;
    const int64_t rank = int64_t(in.size());
    auto start = one(1), end = one(2), axis = one(3);
    std::optional<int64_t> step = n.inputs.size() > 4 && n.inputs[4] != kNoValue ? one(4) : std::optional<int64_t>(1);
    if (rank == 0 || !start || !end || !axis || step != 1 || (*axis != -1 && *axis != rank - 1) || *start < 0 || *end < 0)
      return std::nullopt;
    *data = n.inputs[0];
    return std::make_pair(*start, std::min(*end, in.back()));
  }

  // Every value x's dtype, cos and sin broadcasting over x's shape with their last dim x's
  // or 1, the sum of x's shape.
  bool fits(const Rotary& r, const Value& sum) const {
    const Value& x = g_.value(r.x);
    if (!is_floating(x.dtype) || sum.dtype != x.dtype || sum.shape != x.shape) return false;
    for (ValueId t : {r.cos, r.sin}) {
      const Value& v = g_.value(t);
      if (v.dtype != x.dtype || v.shape.empty() || v.shape.size() > x.shape.size()) return false;
      if (v.shape.back() != x.shape.back() && v.shape.back() != 1) return false;
      for (size_t k = 0; k < v.shape.size(); ++k) {
        const int64_t own = v.shape[v.shape.size() - 1 - k], of_x = x.shape[x.shape.size() - 1 - k];
        if (own != of_x && own != 1) return false;
      }
    }
    return true;
  }

  const Graph& g_;
  std::vector<std::vector<NodeId>> consumers_;
  std::unordered_set<ValueId> outputs_;
};

// Writes the two halves and their Concat at `position`, the Concat into `out`.
class HalvesWriter {
 public:
  HalvesWriter(Graph& g, const Node& sum, NodeId position) : g_(g), insert_(g, sum, position, "rotary_half") {}

  Status write(const Rotary& r, ValueId out) {
    const Value& x = g_.value(r.x);
    const int64_t width = x.shape.back();
    STRIDER_ASSIGN_OR_RETURN(ValueId cos1, half_of(r.cos, 0, r.half));
    STRIDER_ASSIGN_OR_RETURN(ValueId cos2, half_of(r.cos, r.half, width));
    STRIDER_ASSIGN_OR_RETURN(ValueId sin1, half_of(r.sin, 0, r.half));
    STRIDER_ASSIGN_OR_RETURN(ValueId sin2, half_of(r.sin, r.half, width));
    STRIDER_ASSIGN_OR_RETURN(ValueId first, sum_of_products("Sub", r.x1, cos1, r.x2, sin1));
    STRIDER_ASSIGN_OR_RETURN(ValueId second, sum_of_products("Add", r.x2, cos2, r.x1, sin2));
    AttributeMap axis;
    axis.set_int("axis", -1);
    return insert_.node_into("Concat", {first, second}, {out}, std::move(axis));
  }

 private:
  // a * b + c * d (or -, `op`), each product rounded, as the pattern computes it.
  Result<ValueId> sum_of_products(const char* op, ValueId a, ValueId b, ValueId c, ValueId d) {
    STRIDER_ASSIGN_OR_RETURN(ValueId ab, typed_as(a, "Mul", {a, b}));
    STRIDER_ASSIGN_OR_RETURN(ValueId cd, typed_as(a, "Mul", {c, d}));
    return typed_as(a, op, {ab, cd});
  }
  Result<ValueId> typed_as(ValueId like, const std::string& op, std::vector<ValueId> inputs) {
    const Value& v = g_.value(like);
    return insert_.node(op, std::move(inputs), v.dtype, v.shape);
  }
  // Columns [start, end) of `v`'s last axis, or `v` itself where that axis is 1 wide.
  Result<ValueId> half_of(ValueId v, int64_t start, int64_t end) {
    if (g_.value(v).shape.back() == 1) return v;
    Shape shape = g_.value(v).shape;
    shape.back() = end - start;
    std::vector<ValueId> ins = {v};
    for (int64_t c : {start, end, int64_t(-1)}) {
      STRIDER_ASSIGN_OR_RETURN(ValueId k, insert_.constant(std::make_shared<const Tensor>(Tensor::from_values<int64_t>(
                                              DType::kI64, {1}, std::vector<int64_t>{c}))));
      ins.push_back(k);
    }
    return insert_.node("Slice", std::move(ins), g_.value(v).dtype, shape);
  }

  Graph& g_;
  rewriting::NodeInserter insert_;
};

}  // namespace

Result<int> split_rotate_half(Graph& graph) {
  int rewritten = 0;
  // The matcher holds the graph's consumers: built once, again only after a rewrite (building
  // it for every node made this pass quadratic: 0.6 s of a 1764-node unrolled LSTM's session).
  std::optional<RotaryMatcher> matcher;
  for (NodeId id = 0; id < graph.num_nodes(); ++id) {
    if (graph.node(id).op_type != "Concat") continue;
    if (!matcher) matcher.emplace(graph);
    std::optional<Rotary> r = matcher->match(id);
    if (!r) continue;
    matcher.reset();
    const Node sum = graph.node(r->sum);
    const ValueId out = sum.outputs[0];
    // The pattern's nodes go; the halves take the sum's place (everything they read is
    // written before the sum: x, its two Slices, cos and sin).
    NodeId position = r->sum;
    for (NodeId n : r->removed) position -= n < r->sum ? 1 : 0;
    std::vector<const Node*> removed;
    for (NodeId n : r->removed) removed.push_back(&graph.node(n));
    graph.remove_nodes_if([&](const Node& n) { return std::find(removed.begin(), removed.end(), &n) != removed.end(); });
    STRIDER_RETURN_IF_ERROR(HalvesWriter(graph, sum, position).write(*r, out));
    ++rewritten;
    id = -1;  // node ids moved: look again from the start (a handful of patterns a model)
  }
  return rewritten;
}

}  // namespace strider
