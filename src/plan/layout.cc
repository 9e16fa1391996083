// Which values take channels-last strides when the session's layout is nhwc: the images.
//
// A rank-4 or rank-5 value (rank 3 too where the device takes 1-D convolutions
// channels-last: DeviceCapabilities::channels_last_1d) is an image when a spatial op (a convolution, a pool, a
// normalization over channels, a resize) reads or writes it as its data, or when it reaches
// one through ops for which dim 1 keeps its meaning (elementwise maps, Concat, Split,
// Slice, Pad, Identity, Materialize). Everything else stays row-major, however many dims it
// has: a transformer's attention scores [batch, heads, queries, keys] are rank 4, and with
// dim 1 innermost their matmuls would read rows interleaved across heads (cuBLASLt cannot
// take such operands at all; oneDNN takes them slowly). The decision is a pure function of
// the graph, so it is part of the plan's determinism.
#include <array>
#include <string_view>

#include "ops/op_registry.h"
#include "plan/planner_state.h"

namespace strider::plan_internal {
namespace {

constexpr std::array<std::string_view, 21> kSpatialOps = {
    "Conv", "ConvTranspose", "FusedConv", "FusedGatedConv", "FusedGatedStack", "FusedWaveNetLayer", "FusedPointwiseDepthwise", "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool",
    "LpPool", "MaxUnpool", "BatchNormalization", "InstanceNormalization", "GroupNormalization", "LRN",
    "Resize", "Upsample", "DepthToSpace", "SpaceToDepth"};
constexpr std::array<std::string_view, 7> kChannelPreservingOps = {"Concat", "Split", "Slice", "Pad",
                                                                   "Identity", "Dropout", "Materialize"};

template <size_t N>
bool is_one_of(const std::array<std::string_view, N>& ops, std::string_view op) {
  for (std::string_view o : ops)
    if (o == op) return true;
  return false;
}

bool channel_preserving(const Node& node) {
  if (is_one_of(kChannelPreservingOps, node.op_type)) return true;
  const OpSchema* schema = find_op_schema(node.domain, node.op_type);
  return schema != nullptr && schema->traits.in_place;  // elementwise
}

bool image_rank(const PlannerState& s, ValueId v) {
  if (v == kNoValue || s.graph.value(v).is_constant()) return false;
  size_t rank = s.graph.value(v).shape.size();
  return rank == 4 || rank == 5 || (rank == 3 && s.capabilities.channels_last_1d);
}

// Marks the data operands of a node (inputs and outputs of image rank); true if any changed.
bool mark_all(PlannerState& s, const Node& node) {
  bool changed = false;
  auto mark = [&](ValueId v) {
    if (image_rank(s, v) && !s.channels_last[size_t(v)]) changed = s.channels_last[size_t(v)] = true;
  };
  for (ValueId v : node.inputs) mark(v);
  for (ValueId v : node.outputs) mark(v);
  return changed;
}

}  // namespace

void decide_layouts(PlannerState& s) {
  const Graph& g = s.graph;
  s.channels_last.assign(size_t(g.num_values()), false);
  if (s.layout != LayoutChoice::kNhwc) return;
  for (NodeId id = 0; id < g.num_nodes(); ++id) {
    const Node& node = g.node(id);
    if (!is_one_of(kSpatialOps, node.op_type)) continue;
    // Input 0 and output 0; every output of a FusedWaveNetLayer (Y, S and G, any absent).
    std::vector<ValueId> marked = {node.input(0), node.outputs.empty() ? kNoValue : node.outputs[0]};
    if (node.op_type == "FusedWaveNetLayer") marked.insert(marked.end(), node.outputs.begin(), node.outputs.end());
    for (ValueId v : marked)
      if (image_rank(s, v)) s.channels_last[size_t(v)] = true;
  }
  // To a fixed point: each pass over the channel-preserving nodes spreads the marks one
  // node further (in both directions); there are at most as many passes as values.
  for (bool changed = true; changed;) {
    changed = false;
    for (NodeId id = 0; id < g.num_nodes(); ++id) {
      const Node& node = g.node(id);
      if (!channel_preserving(node)) continue;
      bool any = false;
      for (ValueId v : node.inputs) any = any || (v != kNoValue && s.channels_last[size_t(v)]);
      for (ValueId v : node.outputs) any = any || (v != kNoValue && s.channels_last[size_t(v)]);
      if (any && mark_all(s, node)) changed = true;
    }
  }
}

}  // namespace strider::plan_internal
