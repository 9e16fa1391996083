// The planner's decisions (views, concat in place, in place) and the orchestration of
// make_plan. See planner.h for the design.
#include "plan/planner.h"

#include <fmt/format.h>

#include <algorithm>

#include "ops/op_registry.h"
#include "ops/shape_ops.h"
#include "ops/view_ops.h"
#include "plan/planner_state.h"
#include "plan/verify.h"

namespace strider {

PlanOptions unoptimized_plan_options() {
  PlanOptions o;
  o.layout = LayoutChoice::kNchw;
  o.views = o.concat_in_place = o.in_place = o.reuse_memory = false;
  return o;
}

LayoutChoice resolve_layout(const Graph& graph, LayoutChoice choice, const DeviceCapabilities& capabilities) {
  if (choice != LayoutChoice::kAuto) return choice;
  int convs = 0;
  DType dtype = DType::kF32;
  for (NodeId id = 0; id < graph.num_nodes(); ++id) {
    const Node& node = graph.node(id);
    ValueId weights = node.input(1);
    // A fused conv counts too: layout is chosen after fusion, which may leave no plain Conv.
    const bool conv = node.op_type == "Conv" ||
                      (node.domain == "strider" && (node.op_type == "FusedConv" || node.op_type == "FusedGatedConv" ||
                                                    node.op_type == "FusedGatedStack" || node.op_type == "FusedWaveNetLayer" ||
                                                    node.op_type == "FusedPointwiseDepthwise"));
    const size_t rank = weights == kNoValue ? 0 : graph.value(weights).shape.size();
    if (conv && (rank == 4 || (rank == 3 && capabilities.channels_last_1d))) {
      ++convs;
      dtype = graph.value(node.inputs[0]).dtype;
    }
  }
  bool conv_heavy = convs > 0 && convs * 10 >= graph.num_nodes();
  return conv_heavy && capabilities.prefers_channels_last(dtype) ? LayoutChoice::kNhwc : LayoutChoice::kNchw;
}

namespace plan_internal {
namespace {

const OpTraits& traits_of(const Node& node) {
  static const OpTraits kNone;
  const OpSchema* schema = find_op_schema(node.domain, node.op_type);
  return schema ? schema->traits : kNone;
}

// A value that owns its bytes and lives in the arena (not an input, constant or output).
bool owns_arena_bytes(const PlannerState& s, ValueId v) {
  return s.decisions[size_t(v)].role == ValueRole::kOwn && !s.graph.value(v).is_constant() &&
         !s.is_graph_input[size_t(v)] && !s.is_graph_output[size_t(v)];
}

bool is_scalar_constant(const Graph& graph, ValueId v) {
  return v != kNoValue && graph.value(v).is_constant() && graph.value(v).shape.empty();
}

}  // namespace

void decide_views(PlannerState& s) {
  for (NodeId id = 0; id < s.graph.num_nodes(); ++id) {
    const Node& node = s.graph.node(id);
    ViewKind kind = traits_of(node).view;
    if (kind == ViewKind::kNone || s.dense_node[size_t(id)]) continue;
    if (kind == ViewKind::kGather && !is_scalar_constant(s.graph, node.input(1))) continue;
    for (ValueId out : node.outputs) {
      if (out == kNoValue || s.is_graph_output[size_t(out)]) continue;  // outputs own their bytes
      s.decisions[size_t(out)] = {ValueRole::kView, node.inputs[0]};
    }
  }
}

namespace {

// The Transpose -> Reshape pattern whose Reshape would copy, found from the Reshape: the
// Transpose's output and its input, a kernel's output of its own read by nothing else.
struct ThroughPattern {
  ValueId transposed = kNoValue, source = kNoValue;
};

std::optional<ThroughPattern> through_pattern(const PlannerState& s, const Node& reshape) {
  if (reshape.op_type != "Reshape" && reshape.op_type != "Flatten") return std::nullopt;
  const ValueId out = reshape.outputs.empty() ? kNoValue : reshape.outputs[0];
  if (out == kNoValue || s.decisions[size_t(out)].role != ValueRole::kView || s.is_graph_output[size_t(out)])
    return std::nullopt;
  const ValueId t = reshape.inputs[0];
  const NodeId transpose = s.graph.value(t).producer;
  if (transpose == kNoNode || s.graph.node(transpose).op_type != "Transpose" || s.consumers[size_t(t)].size() != 1 ||
      s.decisions[size_t(t)].role != ValueRole::kView || s.dense_node[size_t(transpose)])
    return std::nullopt;
  const ValueId v = s.graph.node(transpose).inputs[0];
  const NodeId producer = s.graph.value(v).producer;
  if (producer == kNoNode || s.decisions[size_t(v)].role != ValueRole::kOwn || !owns_arena_bytes(s, v) ||
      s.consumers[size_t(v)].size() != 1 || s.dense_node[size_t(producer)] || traits_of(s.graph.node(producer)).view != ViewKind::kNone)
    return std::nullopt;
  return ThroughPattern{t, v};
}

// Whether the Reshape of the transposed value would have to copy: the views it would get
// from the value's own layout, on a stand-in allocation.
bool reshape_would_copy(const PlannerState& s, const Node& reshape, const ThroughPattern& p) {
  const Value& v = s.graph.value(p.source);
  Allocation stand_in(0, "stand-in", kPlannedDevice, nullptr, num_elements(v.shape) * dtype_size(v.dtype), 64,
                      StorageMode::kDevice, false);
  auto source = make_view(stand_in, 0, v.dtype, v.shape, layout_strides(s, p.source), "stand-in");
  if (!source.is_ok()) return false;
  const Node& transpose = s.graph.node(s.graph.value(p.transposed).producer);
  auto transposed = output_view(NodeInputs(s.graph, transpose), 0, *source);
  if (!transposed.is_ok() || !*transposed) return false;
  auto reshaped = output_view(NodeInputs(s.graph, reshape), 0, **transposed);
  return reshaped.is_ok() && !*reshaped;
}

}  // namespace

// Attention merges its heads as (probs @ V).transpose(1, 2).reshape(b, s, h * d): the
// Reshape of the transposed product admits no view, so it would copy. Instead the Reshape's
// output gets the bytes and the product is placed in them through the inverse of those two
// views (a strided output its kernel writes, or refuses, and the node goes dense), so the
// Transpose and the Reshape are views and nothing is copied.
void decide_placed_through(PlannerState& s) {
  for (NodeId id = 0; id < s.graph.num_nodes(); ++id) {
    const Node& node = s.graph.node(id);
    if (s.dense_node[size_t(id)]) continue;
    std::optional<ThroughPattern> p = through_pattern(s, node);
    if (!p || !reshape_would_copy(s, node, *p)) continue;
    s.decisions[size_t(node.outputs[0])] = Decision{};
    Decision placed;
    placed.role = ValueRole::kPlacedThrough;
    placed.alias_of = node.outputs[0];
    placed.through = p->transposed;
    s.decisions[size_t(p->source)] = placed;
  }
}

namespace {

struct ConcatPart {
  ValueId value;
  int64_t offset, size;  // along the concat axis
};

// If `v` is a step-1 slice of the value it views along `axis` only (a Split output, or a
// Slice of that axis), its offset there; otherwise nullopt.
std::optional<int64_t> slice_offset(const PlannerState& s, ValueId v, int64_t axis) {
  const Decision& d = s.decisions[size_t(v)];
  if (d.role != ValueRole::kView) return std::nullopt;
  const Node& node = s.graph.node(s.graph.value(v).producer);
  NodeInputs inputs(s.graph, node);
  if (node.op_type == "Split") {
    auto p = resolve_split(inputs);
    if (!p.is_ok() || p->axis != axis) return std::nullopt;
    int64_t offset = 0;
    for (size_t i = 0; node.outputs[i] != v; ++i) offset += p->sizes[i];
    return offset;
  }
  if (node.op_type == "Slice") {
    auto axes = resolve_slice(inputs);
    if (!axes.is_ok()) return std::nullopt;
    std::optional<int64_t> offset = 0;
    const Shape& full = s.graph.value(d.alias_of).shape;
    for (const SliceAxis& a : *axes) {
      bool whole = a.start == 0 && a.step == 1 && a.count == full[size_t(a.axis)];
      if (a.axis == axis && a.step == 1) offset = a.start;
      else if (!whole) return std::nullopt;
    }
    return offset;
  }
  return std::nullopt;
}

// Chunks of one value concatenated back in order (torch's C2f: split, then concat of the
// chunks with more parts): placing the chunked value itself in the concat makes every
// chunk already sit in its slice. Returns the offset for `root`, or nullopt when some
// part overlapping its slice is not the matching chunk of it.
std::optional<int64_t> root_placement(const PlannerState& s, const std::vector<ConcatPart>& parts, size_t index,
                                      ValueId root, int64_t axis, const Value& concat) {
  std::optional<int64_t> within = slice_offset(s, parts[index].value, axis);
  if (!within) return std::nullopt;
  const Value& r = s.graph.value(root);
  int64_t start = parts[index].offset - *within, size = r.shape[size_t(axis)];
  if (start < 0 || start + size > concat.shape[size_t(axis)] || r.dtype != concat.dtype) return std::nullopt;
  for (size_t d = 0; d < r.shape.size(); ++d)
    if (int64_t(d) != axis && r.shape[d] != concat.shape[d]) return std::nullopt;
  for (const ConcatPart& q : parts) {
    if (q.offset + q.size <= start || q.offset >= start + size) continue;
    std::optional<int64_t> q_within = slice_offset(s, q.value, axis);
    if (s.decisions[size_t(q.value)].alias_of != root || !q_within || *q_within != q.offset - start) return std::nullopt;
  }
  return start;
}

bool placeable(const PlannerState& s, ValueId v, const std::vector<bool>& claimed) {
  NodeId producer = s.graph.value(v).producer;
  return owns_arena_bytes(s, v) && !claimed[size_t(v)] && producer != kNoNode && !s.dense_node[size_t(producer)];
}

void place_concat_parts(PlannerState& s, const Node& node, std::vector<bool>& claimed) {
  ValueId output = node.outputs[0];
  const Value& concat = s.graph.value(output);
  int64_t axis = node.attributes.get_int("axis", 0).value();
  if (axis < 0) axis += int64_t(concat.shape.size());
  std::vector<ConcatPart> parts;
  int64_t offset = 0;
  for (ValueId part : node.inputs) {
    parts.push_back({part, offset, s.graph.value(part).shape[size_t(axis)]});
    offset += parts.back().size;
  }
  for (size_t i = 0; i < parts.size(); ++i) {
    ValueId part = parts[i].value;
    if (placeable(s, part, claimed)) {
      claimed[size_t(part)] = true;  // a part used twice is copied the second time
      s.decisions[size_t(part)] = {ValueRole::kConcatPart, output, axis, parts[i].offset};
      continue;
    }
    ValueId root = s.decisions[size_t(part)].alias_of;
    if (s.decisions[size_t(part)].role != ValueRole::kView || !placeable(s, root, claimed)) continue;
    if (std::optional<int64_t> start = root_placement(s, parts, i, root, axis, concat)) {
      claimed[size_t(root)] = true;
      s.decisions[size_t(root)] = {ValueRole::kConcatPart, output, axis, *start};
    }
  }
}

}  // namespace

void decide_concats(PlannerState& s) {
  std::vector<bool> claimed(size_t(s.graph.num_values()), false);
  for (NodeId id = s.graph.num_nodes(); id-- > 0;) {
    const Node& node = s.graph.node(id);
    if (node.op_type == "Concat" && !s.dense_node[size_t(id)] && !node.outputs.empty())
      place_concat_parts(s, node, claimed);
  }
}

namespace {

// The value whose buffer `v` uses, following aliases to the root.
ValueId root_of(const PlannerState& s, ValueId v) {
  while (s.decisions[size_t(v)].role != ValueRole::kOwn) v = s.decisions[size_t(v)].alias_of;
  return v;
}

// The last node reading any value in each root's buffer.
std::vector<NodeId> last_reads_by_root(const PlannerState& s) {
  std::vector<NodeId> last(size_t(s.graph.num_values()), kNoNode);
  for (ValueId v = 0; v < s.graph.num_values(); ++v) {
    if (s.consumers[size_t(v)].empty()) continue;
    ValueId root = root_of(s, v);
    last[size_t(root)] = std::max(last[size_t(root)], s.consumers[size_t(v)].back());
  }
  return last;
}

bool may_write_over(const PlannerState& s, const Node& node, NodeId id, ValueId in,
                    const std::vector<NodeId>& last_read) {
  ValueId out = node.outputs[0];
  ValueRole role = s.decisions[size_t(in)].role;
  ValueId root = root_of(s, in);
  const Value& a = s.graph.value(in);
  const Value& b = s.graph.value(out);
  // The input must hold its buffer's bytes in its own arrangement (a root, or an earlier
  // in-place result), and nothing may read the buffer after this node.
  if ((role != ValueRole::kOwn && role != ValueRole::kInPlace) || !owns_arena_bytes(s, root)) return false;
  if (a.dtype != b.dtype || a.shape != b.shape || last_read[size_t(root)] != id) return false;
  // Another operand of this node that shares the bytes in another arrangement would be
  // read after being overwritten.
  for (ValueId other : node.inputs)
    if (other != kNoValue && other != in && root_of(s, other) == root) return false;
  return true;
}

}  // namespace

void decide_in_place(PlannerState& s) {
  std::vector<NodeId> last_read = last_reads_by_root(s);
  for (NodeId id = 0; id < s.graph.num_nodes(); ++id) {
    const Node& node = s.graph.node(id);
    if (!traits_of(node).in_place || s.dense_node[size_t(id)] || node.outputs.size() != 1) continue;
    ValueId out = node.outputs[0];
    if (out == kNoValue || !owns_arena_bytes(s, out)) continue;
    for (ValueId in : node.inputs) {
      if (in == kNoValue || !may_write_over(s, node, id, in, last_read)) continue;
      s.decisions[size_t(out)] = {ValueRole::kInPlace, in};
      // The buffer now lives until the last reader of the output or of its views (counted
      // under the output while it was a root).
      ValueId root = root_of(s, in);
      last_read[size_t(root)] = std::max(id, last_read[size_t(out)]);
      break;
    }
  }
}

}  // namespace plan_internal

namespace {

using plan_internal::PlannerState;

void index_graph(PlannerState& s) {
  const Graph& g = s.graph;
  size_t n = size_t(g.num_values());
  s.decisions.assign(n, {});
  s.consumers = g.consumers();
  s.is_graph_input.assign(n, false);
  s.is_graph_output.assign(n, false);
  s.used.assign(n, false);
  for (ValueId v : g.inputs()) s.is_graph_input[size_t(v)] = s.used[size_t(v)] = true;
  for (ValueId v : g.outputs()) s.is_graph_output[size_t(v)] = s.used[size_t(v)] = true;
  for (NodeId id = 0; id < g.num_nodes(); ++id) {
    for (ValueId v : g.node(id).inputs)
      if (v != kNoValue) s.used[size_t(v)] = true;
    for (ValueId v : g.node(id).outputs)
      if (v != kNoValue) s.used[size_t(v)] = true;
  }
  s.dense_node.assign(size_t(g.num_nodes()), false);
  for (NodeId id = 0; id < g.num_nodes(); ++id)
    s.dense_node[size_t(id)] = s.options.dense_nodes.count(g.node(id).name) != 0;
}

// Inserts a Materialize node (a dense copy) before each dense node for every input whose
// view is not packed. Returns true if it changed the graph.
Result<bool> materialize_unpacked_inputs(PlannerState& s) {
  bool changed = false;
  for (NodeId id = s.graph.num_nodes(); id-- > 0;) {
    if (!s.dense_node[size_t(id)]) continue;
    for (size_t i = 0; i < s.graph.node(id).inputs.size(); ++i) {
      ValueId in = s.graph.node(id).inputs[i];
      if (in == kNoValue || is_packed(*s.virtual_views[size_t(in)])) continue;
      const Value source = s.graph.value(in);
      STRIDER_ASSIGN_OR_RETURN(ValueId dense, s.graph.add_value(fmt::format("{}.dense.{}", source.name, s.graph.num_values())));
      Value& v = s.graph.value(dense);
      v.has_type = v.has_shape = true;
      v.dtype = source.dtype;
      v.shape = source.shape;
      Node copy;
      copy.name = fmt::format("Materialize_{}_{}", s.graph.node(id).name, i);
      copy.op_type = "Materialize";
      copy.domain = "strider";
      copy.inputs = {in};
      copy.outputs = {dense};
      s.graph.node(id).inputs[i] = dense;
      STRIDER_RETURN_IF_ERROR(s.graph.insert_node(id, std::move(copy)).status());
      changed = true;
    }
  }
  return changed;
}

// Decides and resolves, again after each round of Materialize insertion until every dense
// node's inputs are packed: inserting one can change what other values become (a value
// that was its own can turn into a view of another), so one round is not always enough.
// Each round replaces an input of a dense node by a packed copy, so the rounds are few.
Status decide_and_resolve(PlannerState& s) {
  for (int round = 0;; ++round) {
    index_graph(s);
    plan_internal::decide_layouts(s);
    if (s.options.views) plan_internal::decide_views(s);
    if (s.options.views && s.options.concat_in_place && s.capabilities.places_outputs_through_views)
      plan_internal::decide_placed_through(s);
    if (s.options.concat_in_place) plan_internal::decide_concats(s);
    if (s.options.in_place) plan_internal::decide_in_place(s);
    STRIDER_RETURN_IF_ERROR(plan_internal::resolve_values(s));
    STRIDER_ASSIGN_OR_RETURN(bool changed, materialize_unpacked_inputs(s));
    if (!changed) return Status::ok();
    if (round > s.graph.num_nodes())
      return internal_error("planning dense nodes did not converge");
  }
}

}  // namespace

DeviceCapabilities capabilities_of(const Device& device) {
  DeviceCapabilities c;
  c.channels_last_f32 = device.prefers_channels_last(DType::kF32);
  c.channels_last_bf16 = device.prefers_channels_last(DType::kBF16);
  c.places_outputs_through_views = device.places_outputs_through_views();
  c.channels_last_1d = device.channels_last_1d();
  return c;
}

Result<PlannedGraph> make_plan(Graph graph, const DeviceCapabilities& capabilities, const PlanOptions& options) {
  PlannedGraph planned{std::move(graph), Plan()};
  Graph& g = planned.graph;
  PlannerState state(g, capabilities, options);
  state.layout = resolve_layout(g, options.layout, capabilities);
  STRIDER_RETURN_IF_ERROR(decide_and_resolve(state));
  plan_internal::compute_lifetimes(state);
  Plan& plan = planned.plan;
  plan.layout = state.layout == LayoutChoice::kNhwc ? "nhwc" : "nchw";
  STRIDER_RETURN_IF_ERROR(plan_internal::place(state, plan));
  if (options.verify) STRIDER_RETURN_IF_ERROR(verify_plan(g, plan));
  return planned;
}

}  // namespace strider
