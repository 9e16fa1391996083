#include "passes/fuse_attention.h"

#include <algorithm>
#include <optional>
#include <unordered_set>

#include "ops/fused_attention.h"
#include "ops/op_registry.h"
#include "passes/replace_pattern.h"

namespace strider {
namespace {

bool attention_dtype(DType t) { return t == DType::kF32 || t == DType::kBF16 || t == DType::kF16; }

// One found pattern: its nodes (to remove; the last is the final MatMul), operands, params.
struct Match {
  std::vector<NodeId> nodes;
  ValueId q = kNoValue, kt = kNoValue, v = kNoValue;
  std::vector<ValueId> step_operands;  // in step order
  FusedAttentionParams params;
  // Grouped heads (params.kv_repeat > 1): Kt's Transpose, to read kt_source instead of the
  // repeated keys.
  NodeId kt_transpose = kNoNode;
  ValueId kt_source = kNoValue;
};

class AttentionMatcher {
 public:
  explicit AttentionMatcher(const Graph& g) : g_(g), consumers_(g.consumers()), outputs_(g.outputs().begin(), g.outputs().end()) {}

  std::optional<Match> match(NodeId softmax_id) const {
    const Node& softmax = g_.node(softmax_id);
    if (!softmax.in_default_domain() || !last_axis_softmax(softmax)) return std::nullopt;
    Match m;
    ValueId s = softmax.inputs[0];
    const Shape scores = g_.value(s).shape;
    std::vector<ScoreStep> steps;
    std::vector<ValueId> operands;
    if (!match_scores(s, scores, steps, operands, m)) return std::nullopt;
    std::reverse(steps.begin(), steps.end());
    std::reverse(operands.begin(), operands.end());
    m.params.steps = std::move(steps);
    m.step_operands = std::move(operands);
    m.nodes.push_back(softmax_id);
    if (!match_tail(softmax.outputs[0], m)) return std::nullopt;
    if (!valid_types(m)) return std::nullopt;
    absorb_repeated_heads(m);
    return m;
  }

 private:
  bool last_axis_softmax(const Node& n) const {
    if (n.op_type != "Softmax" || n.inputs.size() != 1 || n.outputs.size() != 1) return false;
    const Value& x = g_.value(n.inputs[0]);
    const int64_t rank = int64_t(x.shape.size());
    auto axis = n.attributes.get_int("axis", n.opset < 13 ? 1 : -1);
    if (!axis.is_ok() || rank < 2 || !attention_dtype(x.dtype)) return false;
    return (*axis < 0 ? *axis + rank : *axis) == rank - 1;
  }

  // A value read only by one node, not a graph output: one the pattern may remove.
  bool internal(ValueId v) const { return !outputs_.count(v) && consumers_[size_t(v)].size() == 1; }

  std::optional<float> scalar_constant(ValueId v) const {
    if (v == kNoValue) return std::nullopt;
    const Value& value = g_.value(v);
    if (!value.is_constant() || value.constant->num_elements() != 1 || !is_floating(value.dtype)) return std::nullopt;
    return float(value.constant->element_as_double(0));
  }

  // Walks back from the scores value `s` (of shape `scores`) to the MatMul of Q and Kt,
  // collecting the steps in reverse. Tries each side of an Add whose both sides fit.
  bool match_scores(ValueId s, const Shape& scores, std::vector<ScoreStep>& steps, std::vector<ValueId>& operands,
                    Match& m) const {
    const NodeId id = g_.value(s).producer;
    if (id == kNoNode || !internal(s) || g_.value(s).shape != scores) return false;
    const Node& n = g_.node(id);
    if (!n.in_default_domain() || n.outputs.size() != 1) return false;
    auto continue_with = [&](ValueId x, ScoreStep step, ValueId operand) {
      if (int(steps.size()) >= kMaxScoreSteps) return false;
      const size_t mark = m.nodes.size();
      steps.push_back(step);
      if (operand != kNoValue) operands.push_back(operand);
      m.nodes.push_back(id);
      if (match_scores(x, scores, steps, operands, m)) return true;
      steps.pop_back();
      if (operand != kNoValue) operands.pop_back();
      m.nodes.resize(mark);
      return false;
    };
    if (n.op_type == "Cast" && n.inputs.size() == 1 && attention_dtype(g_.value(n.inputs[0]).dtype) &&
        attention_dtype(g_.value(s).dtype)) {  // the kernel's scores are f32 throughout
      m.nodes.push_back(id);
      if (match_scores(n.inputs[0], scores, steps, operands, m)) return true;
      m.nodes.pop_back();
      return false;
    }
    if (n.op_type == "MatMul" && n.inputs.size() == 2) {
      if (g_.value(n.inputs[0]).shape.size() < 2 || g_.value(n.inputs[1]).shape.size() < 2) return false;
      m.q = n.inputs[0];
      m.kt = n.inputs[1];
      m.nodes.push_back(id);
      return true;
    }
    if (n.inputs.size() == 2 && (n.op_type == "Mul" || n.op_type == "Div")) {
      const bool mul = n.op_type == "Mul";
      for (int side = 0; side < (mul ? 2 : 1); ++side)
        if (auto c = scalar_constant(n.inputs[size_t(1 - side)]))
          if (continue_with(n.inputs[size_t(side)], {mul ? ScoreStepKind::kMul : ScoreStepKind::kDiv, *c}, kNoValue))
            return true;
      return false;
    }
    if (n.op_type == "Add" && n.inputs.size() == 2) {
      for (int side = 0; side < 2; ++side)
        if (continue_with(n.inputs[size_t(side)], {ScoreStepKind::kAdd, 0.0f}, n.inputs[size_t(1 - side)])) return true;
      return false;
    }
    if (n.op_type == "Where" && n.inputs.size() == 3 && g_.value(n.inputs[0]).dtype == DType::kBool) {
      if (auto fill = scalar_constant(n.inputs[2]))
        if (continue_with(n.inputs[1], {ScoreStepKind::kKeepWhere, *fill}, n.inputs[0])) return true;
      if (auto fill = scalar_constant(n.inputs[1]))
        if (continue_with(n.inputs[2], {ScoreStepKind::kFillWhere, *fill}, n.inputs[0])) return true;
    }
    return false;
  }

  // The producer of internal value `v` if it is one of `ops` (default domain), or null.
  const Node* internal_producer(ValueId v, std::initializer_list<std::string_view> ops, NodeId* id) const {
    if (v == kNoValue || !internal(v) || (*id = g_.value(v).producer) == kNoNode) return nullptr;
    const Node& n = g_.node(*id);
    if (!n.in_default_domain() || n.inputs.empty() || n.outputs.size() != 1) return nullptr;
    for (std::string_view op : ops)
      if (n.op_type == op) return &n;
    return nullptr;
  }

  // torch's repeat_kv ending in `value`: X [.., G, S, D] -> Unsqueeze (or Reshape)
  // [.., G, 1, S, D] -> Expand [.., G, r, S, D] -> Reshape [.., G r, S, D], each read only by
  // the next. X and r (> 1), the three nodes appended to `nodes`; nullopt for anything else.
  std::optional<std::pair<ValueId, int64_t>> repeated_heads(ValueId value, std::vector<NodeId>& nodes) const {
    NodeId merge_id = kNoNode, expand_id = kNoNode, unit_id = kNoNode;
    const Node* merge = internal_producer(value, {"Reshape"}, &merge_id);
    const Node* expand = merge ? internal_producer(merge->inputs[0], {"Expand"}, &expand_id) : nullptr;
    const Node* unit = expand ? internal_producer(expand->inputs[0], {"Unsqueeze", "Reshape"}, &unit_id) : nullptr;
    if (!unit) return std::nullopt;
    const Shape &merged = g_.value(value).shape, &expanded = g_.value(merge->inputs[0]).shape;
    const Shape &unit_shape = g_.value(expand->inputs[0]).shape, &source = g_.value(unit->inputs[0]).shape;
    const size_t n = merged.size();
    if (n < 3 || expanded.size() != n + 1 || unit_shape.size() != n + 1 || source.size() != n) return std::nullopt;
    const int64_t groups = expanded[n - 3], r = expanded[n - 2];
    Shape want_expanded(merged.begin(), merged.end() - 3), want_unit, want_source;
    want_expanded.insert(want_expanded.end(), {groups, r, merged[n - 2], merged[n - 1]});
    want_unit = want_expanded;
    want_unit[n - 2] = 1;
    want_source = merged;
    want_source[n - 3] = groups;
    if (r < 2 || groups * r != merged[n - 3] || expanded != want_expanded || unit_shape != want_unit || source != want_source)
      return std::nullopt;
    nodes.insert(nodes.end(), {merge_id, expand_id, unit_id});
    return std::make_pair(unit->inputs[0], r);
  }

  // Grouped-query attention written as torch's repeat_kv before V and before Kt or Kt's
  // Transpose: the node reads the key and value heads in place
  // (FusedAttentionParams::kv_repeat) and the repeats' nodes join the pattern; where both are
  // not there alike, `m` stays as it is.
  void absorb_repeated_heads(Match& m) const {
    std::vector<NodeId> nodes;
    auto v = repeated_heads(m.v, nodes);
    if (!v) return;
    NodeId transpose_id = kNoNode;
    auto k = repeated_heads(m.kt, nodes);
    if (!k) {  // Transpose(repeat_kv(K)), the last two dims swapped
      const Node* transpose = internal_producer(m.kt, {"Transpose"}, &transpose_id);
      if (!transpose) return;
      const size_t n = g_.value(m.kt).shape.size();
      std::vector<int64_t> swap_last(n);
      for (size_t d = 0; d < n; ++d) swap_last[d] = int64_t(d);
      std::swap(swap_last[n - 1], swap_last[n - 2]);
      auto perm = transpose->attributes.get_ints("perm", {});
      if (!perm.is_ok() || *perm != swap_last) return;
      k = repeated_heads(transpose->inputs[0], nodes);
    }
    if (!k || k->second != v->second) return;
    m.params.kv_repeat = v->second;
    m.v = v->first;
    if (transpose_id == kNoNode) {
      m.kt = k->first;
    } else {
      m.kt_transpose = transpose_id;
      m.kt_source = k->first;
    }
    m.nodes.insert(m.nodes.begin(), nodes.begin(), nodes.end());  // the sink stays last
  }

  // The single reader of internal value `v`, or null.
  const Node* reader(ValueId v, NodeId* id) const {
    if (!internal(v)) return nullptr;
    *id = consumers_[size_t(v)][0];
    const Node& n = g_.node(*id);
    return n.in_default_domain() ? &n : nullptr;
  }

  // From the softmax's output to the MatMul with V: a Cast, a Dropout or Identity, the NaN
  // guard, each optional, in that order.
  bool match_tail(ValueId p, Match& m) const {
    NodeId id = kNoNode;
    const Node* n = reader(p, &id);
    if (n && n->op_type == "Cast") {
      m.nodes.push_back(id);
      p = n->outputs[0];
      n = reader(p, &id);
    }
    if (n && (n->op_type == "Identity" || n->op_type == "Dropout") && n->inputs[0] == p) {
      for (size_t k = 1; k < n->outputs.size(); ++k)  // Dropout's mask: unread
        if (n->outputs[k] != kNoValue && (outputs_.count(n->outputs[k]) || !consumers_[size_t(n->outputs[k])].empty()))
          return false;
      m.nodes.push_back(id);
      p = n->outputs[0];
      n = reader(p, &id);
    }
    if (!n && !outputs_.count(p) && consumers_[size_t(p)].size() == 2 && nan_guard(p, m)) {
      p = g_.node(m.nodes.back()).outputs[0];
      n = reader(p, &id);
    }
    if (!n || n->op_type != "MatMul" || n->inputs.size() != 2 || n->inputs[0] != p || n->inputs[1] == p) return false;
    if (g_.value(n->inputs[1]).shape.size() < 2) return false;
    m.v = n->inputs[1];
    m.nodes.push_back(id);
    return true;
  }

  // p read by IsNaN(p) and Where(that, 0, p) only.
  bool nan_guard(ValueId p, Match& m) const {
    NodeId isnan = kNoNode, where = kNoNode;
    for (NodeId c : consumers_[size_t(p)]) {
      const Node& n = g_.node(c);
      if (n.op_type == "IsNaN") isnan = c;
      if (n.op_type == "Where") where = c;
    }
    if (isnan == kNoNode || where == kNoNode) return false;
    const Node &i = g_.node(isnan), &w = g_.node(where);
    if (!i.in_default_domain() || !w.in_default_domain() || w.inputs.size() != 3 || !internal(i.outputs[0]) ||
        w.inputs[0] != i.outputs[0] || w.inputs[2] != p || scalar_constant(w.inputs[1]) != 0.0f)
      return false;
    m.nodes.push_back(isnan);
    m.nodes.push_back(where);
    m.params.zero_invalid_rows = true;
    return true;
  }

  bool valid_types(const Match& m) const {
    // What the fused node reads must exist without the pattern's nodes (Add(s, s) would read s).
    std::vector<ValueId> reads = {m.q, m.kt, m.v};
    reads.insert(reads.end(), m.step_operands.begin(), m.step_operands.end());
    for (ValueId r : reads)
      if (std::find(m.nodes.begin(), m.nodes.end(), g_.value(r).producer) != m.nodes.end()) return false;
    const DType t = g_.value(m.q).dtype;
    if (!attention_dtype(t) || g_.value(m.kt).dtype != t || g_.value(m.v).dtype != t) return false;
    if (g_.value(g_.node(m.nodes.back()).outputs[0]).dtype != t) return false;
    size_t k = 0;
    for (const ScoreStep& step : m.params.steps) {
      if (!step_reads_operand(step.kind)) continue;
      const DType want = step.kind == ScoreStepKind::kAdd ? t : DType::kBool;
      if (g_.value(m.step_operands[k++]).dtype != want) return false;
    }
    return true;
  }

  const Graph& g_;
  std::vector<std::vector<NodeId>> consumers_;
  std::unordered_set<ValueId> outputs_;
};

}  // namespace

// The sizes of a match, from its output (batch, q_len, v_head), Q (head) and Kt (keys).
static AttentionShape attention_shape(const Graph& graph, const Match& m) {
  AttentionShape shape;
  const Value& out = graph.value(graph.node(m.nodes.back()).outputs[0]);
  const Shape& q = graph.value(m.q).shape;
  const Shape& kt = graph.value(m.kt).shape;
  shape.dtype = out.dtype;
  if (out.shape.size() >= 2) {
    for (size_t d = 0; d + 2 < out.shape.size(); ++d) shape.batch *= out.shape[d];
    shape.q_len = out.shape[out.shape.size() - 2];
    shape.v_head = out.shape.back();
  }
  if (!q.empty()) shape.head = q.back();
  if (!kt.empty()) shape.keys = kt.back();
  return shape;
}

Result<int> fuse_attention(Graph& graph, const std::function<bool(const AttentionShape&)>& wanted) {
  std::vector<Match> matches;
  {
    AttentionMatcher matcher(graph);
    std::unordered_set<NodeId> taken;
    for (NodeId id = 0; id < graph.num_nodes(); ++id) {
      if (graph.node(id).op_type != "Softmax") continue;
      std::optional<Match> m = matcher.match(id);
      if (!m || std::any_of(m->nodes.begin(), m->nodes.end(), [&](NodeId n) { return taken.count(n); })) continue;
      if (wanted && !wanted(attention_shape(graph, *m))) continue;
      taken.insert(m->nodes.begin(), m->nodes.end());
      matches.push_back(std::move(*m));
    }
  }
  std::vector<PatternReplacement> replacements;
  for (const Match& m : matches) {
    if (m.kt_transpose != kNoNode) {  // Kt's Transpose now reads the key heads themselves
      graph.node(m.kt_transpose).inputs[0] = m.kt_source;
      Shape transposed = graph.value(m.kt_source).shape;
      std::swap(transposed[transposed.size() - 1], transposed[transposed.size() - 2]);
      graph.value(m.kt).shape = std::move(transposed);
    }
    const Node& sink = graph.node(m.nodes.back());
    Node fused;
    fused.name = sink.name + ".attention";
    fused.op_type = std::string(kFusedAttentionOp);
    fused.domain = std::string(kStriderDomain);
    fused.opset = sink.opset;
    fused.inputs = {m.q, m.kt, m.v};
    fused.inputs.insert(fused.inputs.end(), m.step_operands.begin(), m.step_operands.end());
    fused.outputs = sink.outputs;
    fused.expanded_from = sink.expanded_from;
    write_fused_attention(m.params, &fused);
    std::vector<NodeId> ordered = m.nodes;
    std::sort(ordered.begin(), ordered.end());
    std::string names;
    for (NodeId n : ordered) names += (names.empty() ? "" : ",") + graph.node(n).name;
    fused.attributes.set_string("nodes", names);
    STRIDER_RETURN_IF_ERROR(read_fused_attention(fused).status());
    replacements.push_back({m.nodes, std::move(fused)});
  }
  replace_patterns(graph, std::move(replacements));
  return int(matches.size());
}

}  // namespace strider
