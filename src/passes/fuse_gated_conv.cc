#include "passes/fuse_gated_conv.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <unordered_set>

#include "ops/fused_elementwise.h"
#include "ops/op_registry.h"
#include "ops/shape_ops.h"

namespace strider {
namespace {

// A gate's two operands as halves of one value: `source` cut along the channels by `cuts`
// (one Split, or two Slices), the first half `a`.
struct Halves {
  ValueId source = kNoValue, a = kNoValue, b = kNoValue;
  std::vector<NodeId> cuts;
};

// A Conv (and the chomp Slice after it, if any) whose output is a gate's source.
struct GatedConv {
  NodeId conv = kNoNode, chomp = kNoNode;
  int64_t chomp_axis = -1, chomped = 0;  // spatial axis (of the Conv's output) and outputs dropped
};

class GatedConvFuser {
 public:
  GatedConvFuser(Graph& graph, const std::function<bool(const GatedConvUnit&)>& pays)
      : g_(graph), pays_(pays), consumers_(graph.consumers()), outputs_(graph.outputs().begin(), graph.outputs().end()) {}

  Result<int> run() {
    int fused = 0;
    for (NodeId id = 0; id < g_.num_nodes(); ++id) {
      if (removed_.count(id)) continue;
      STRIDER_ASSIGN_OR_RETURN(bool done, try_fuse(id));
      fused += done ? 1 : 0;
    }
    g_.remove_nodes_if([&](const Node& n) { return removed_nodes_.count(&n) != 0; });
    return fused;
  }

 private:
  // Every reader of `v` is `reader` (at least one), and v is not a graph output.
  bool only_read_by(ValueId v, NodeId reader) const {
    if (outputs_.count(v) || consumers_[size_t(v)].empty()) return false;
    for (NodeId c : consumers_[size_t(v)])
      if (c != reader) return false;
    return true;
  }

  std::optional<int64_t> single_int(const Node& n, size_t input) const {
    if (input >= n.inputs.size() || n.inputs[input] == kNoValue) return std::nullopt;
    const Value& v = g_.value(n.inputs[input]);
    if (!v.is_constant() || v.constant->num_elements() != 1 || is_floating(v.dtype)) return std::nullopt;
    return v.constant->element_as_int(0);
  }

  // `v` is Slice(data) along one axis, step 1: that axis, start and count.
  std::optional<SliceAxis> one_axis_slice(ValueId v, ValueId* data) const {
    const NodeId id = g_.value(v).producer;
    if (id == kNoNode || g_.node(id).op_type != "Slice" || !g_.node(id).in_default_domain()) return std::nullopt;
    auto axes = resolve_slice(NodeInputs(g_, g_.node(id)));
    if (!axes.is_ok()) return std::nullopt;
    const Shape& in = g_.value(g_.node(id).inputs[0]).shape;
    std::optional<SliceAxis> cut;
    for (const SliceAxis& s : *axes) {
      if (s.start == 0 && s.step == 1 && s.count == in[size_t(s.axis)]) continue;  // whole axis
      if (cut || s.step != 1) return std::nullopt;
      cut = s;
    }
    *data = g_.node(id).inputs[0];
    return cut;
  }

  // a and b as the first and second channel halves of one value, each read only by `gate`.
  std::optional<Halves> halves(ValueId a, ValueId b, NodeId gate) const {
    if (!only_read_by(a, gate) || !only_read_by(b, gate)) return std::nullopt;
    const NodeId pa = g_.value(a).producer, pb = g_.value(b).producer;
    if (pa == kNoNode || pb == kNoNode) return std::nullopt;
    const Node& split = g_.node(pa);
    if (pa == pb && split.op_type == "Split" && split.in_default_domain() && split.outputs.size() == 2 &&
        split.outputs[0] == a && split.outputs[1] == b) {
      auto p = resolve_split(NodeInputs(g_, split));
      const int64_t rank = int64_t(g_.value(split.inputs[0]).shape.size());
      if (!p.is_ok() || (p->axis != 1 && p->axis != 1 - rank) || p->sizes.size() != 2 || p->sizes[0] != p->sizes[1])
        return std::nullopt;
      return Halves{split.inputs[0], a, b, {pa}};
    }
    ValueId da = kNoValue, db = kNoValue;
    std::optional<SliceAxis> sa = one_axis_slice(a, &da), sb = one_axis_slice(b, &db);
    if (!sa || !sb || da != db || pa == pb) return std::nullopt;
    const int64_t channels = g_.value(da).shape.size() > 1 ? g_.value(da).shape[1] : 0;
    if (sa->axis != 1 || sb->axis != 1 || channels % 2 != 0 || sa->start != 0 || sa->count != channels / 2 ||
        sb->start != channels / 2 || sb->count != channels / 2)
      return std::nullopt;
    return Halves{da, a, b, {pa, pb}};
  }

  // The Conv that computes `source` (read only by the cuts), through a chomp Slice or not.
  std::optional<GatedConv> conv_of(const Halves& h) const {
    auto read_only_by_cuts = [&](ValueId v) {
      if (outputs_.count(v) || consumers_[size_t(v)].empty()) return false;
      for (NodeId c : consumers_[size_t(v)])
        if (std::find(h.cuts.begin(), h.cuts.end(), c) == h.cuts.end()) return false;
      return true;
    };
    if (!read_only_by_cuts(h.source)) return std::nullopt;
    GatedConv gc;
    ValueId z = h.source;
    ValueId y = kNoValue;
    if (std::optional<SliceAxis> chomp = one_axis_slice(z, &y)) {
      const NodeId m = g_.value(z).producer;
      if (chomp->axis < 2 || chomp->start != 0 || !only_read_by(y, m)) return std::nullopt;
      gc.chomp = m, gc.chomp_axis = chomp->axis;
      gc.chomped = g_.value(y).shape[size_t(chomp->axis)] - chomp->count;
      z = y;
    }
    const NodeId c = g_.value(z).producer;
    if (c == kNoNode || g_.node(c).op_type != "Conv" || !g_.node(c).in_default_domain() || g_.node(c).outputs.size() != 1)
      return std::nullopt;
    gc.conv = c;
    return gc;
  }

  // The Conv's attributes with the chomp folded into its end padding (explicit pads), or
  // nullopt where the chomp is not a cut of the end padding at stride 1.
  std::optional<AttributeMap> conv_attributes(const GatedConv& gc) const {
    const Node& conv = g_.node(gc.conv);
    if (gc.chomp == kNoNode) return conv.attributes;
    const Shape& x = g_.value(conv.inputs[0]).shape;
    const Shape& w = g_.value(conv.inputs[1]).shape;
    if (x.size() < 3 || w.size() != x.size()) return std::nullopt;
    auto window = resolve_window(NodeInputs(g_, conv), std::span(x).subspan(2), std::span(w).subspan(2), false);
    if (!window.is_ok()) return std::nullopt;
    const size_t d = size_t(gc.chomp_axis - 2);
    if (window->strides[d] != 1 || window->pads_end[d] < gc.chomped) return std::nullopt;
    window->pads_end[d] -= gc.chomped;
    AttributeMap attributes = conv.attributes;
    std::vector<int64_t> pads = window->pads_begin;
    pads.insert(pads.end(), window->pads_end.begin(), window->pads_end.end());
    attributes.set_ints("pads", pads);
    attributes.set_string("auto_pad", "NOTSET");
    return attributes;
  }

  bool pays(const GatedConv& gc) const {
    if (!pays_) return true;
    const Node& conv = g_.node(gc.conv);
    const Shape& w = g_.value(conv.inputs[1]).shape;
    const Value& y = g_.value(conv.outputs[0]);
    Shape unit_output = y.shape;  // the Conv's, less the chomped steps
    if (gc.chomp != kNoNode) unit_output[size_t(gc.chomp_axis)] -= gc.chomped;
    GatedConvUnit unit{y.dtype, 1, w.size() > 1 ? w[1] : 0, w.empty() ? 0 : w[0] / 2, positions_per_channel(unit_output)};
    for (size_t d = 2; d < w.size(); ++d) unit.taps *= w[d];
    return pays_(unit);
  }

  Result<bool> try_fuse(NodeId id) {
    const Node& gate = g_.node(id);
    if (gate.outputs.size() != 1 || !(gate.domain == kStriderDomain && gate.op_type == kFusedElementwiseOp)) return false;
    auto read = read_fused_program(gate);
    if (!read.is_ok()) return false;
    const FusedProgram& program = *read;
    for (size_t i = 0; i < gate.inputs.size(); ++i)
      for (size_t j = 0; j < gate.inputs.size(); ++j) {
        if (i == j) continue;
        std::optional<Halves> h = halves(gate.inputs[i], gate.inputs[j], id);
        std::optional<GatedConv> gc = h ? conv_of(*h) : std::nullopt;
        std::optional<AttributeMap> attributes = gc ? conv_attributes(*gc) : std::nullopt;
        if (!attributes) continue;
        const Value& out = g_.value(gate.outputs[0]);
        const Value& half = g_.value(gate.inputs[i]);
        if (out.shape != half.shape || out.dtype != half.dtype || !pays(*gc)) continue;
        STRIDER_RETURN_IF_ERROR(fuse(id, i, j, program, *h, *gc, std::move(*attributes)));
        return true;
      }
    return false;
  }

  // The gate's node becomes the FusedGatedConv: registers 0 and 1 the halves, then the
  // gate's other operands in order.
  Status fuse(NodeId id, size_t i, size_t j, const FusedProgram& program, const Halves& h, const GatedConv& gc,
              AttributeMap attributes) {
    const Node& gate = g_.node(id);
    const Node& conv = g_.node(gc.conv);
    std::vector<int> reg(gate.inputs.size());
    std::vector<ValueId> others;
    for (size_t k = 0; k < gate.inputs.size(); ++k) {
      if (k == i || k == j) {
        reg[k] = k == i ? 0 : 1;
      } else {
        others.push_back(gate.inputs[k]);
        reg[k] = 1 + int(others.size());
      }
    }
    FusedProgram fused{2 + int(others.size()), program.code};
    auto renumber = [&](int x) { return x < 0 ? x : x < program.inputs ? reg[size_t(x)] : x - program.inputs + fused.inputs; };
    for (FusedInstruction& in : fused.code) in.a = renumber(in.a), in.b = renumber(in.b);
    Node node = conv;
    node.op_type = std::string(kFusedGatedConvOp);
    node.domain = std::string(kStriderDomain);
    node.attributes = std::move(attributes);
    node.inputs.resize(3, kNoValue);
    node.inputs.insert(node.inputs.end(), others.begin(), others.end());
    node.outputs = gate.outputs;
    write_fused_program(fused, &node);
    node.attributes.set_string("nodes", fmt::format("{},{}", conv.name, gate.name));
    STRIDER_RETURN_IF_ERROR(read_fused_program_of(node, fused.inputs).status());
    removed_nodes_.insert(&g_.node(gc.conv));
    removed_.insert(gc.conv);
    for (NodeId cut : h.cuts) removed_nodes_.insert(&g_.node(cut)), removed_.insert(cut);
    if (gc.chomp != kNoNode) removed_nodes_.insert(&g_.node(gc.chomp)), removed_.insert(gc.chomp);
    g_.node(id) = std::move(node);
    return Status::ok();
  }

  Graph& g_;
  const std::function<bool(const GatedConvUnit&)>& pays_;
  const std::vector<std::vector<NodeId>> consumers_;
  const std::unordered_set<ValueId> outputs_;
  std::unordered_set<NodeId> removed_;
  std::unordered_set<const Node*> removed_nodes_;
};

}  // namespace

Result<int> fuse_gated_convs(Graph& graph, const std::function<bool(const GatedConvUnit&)>& pays) {
  return GatedConvFuser(graph, pays).run();
}

}  // namespace strider
