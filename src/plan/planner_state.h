// The planner's working state, shared by its passes (planner.cc: decisions;
// resolve.cc: views and buffers; arena.cc: lifetimes and packing). Internal to src/plan.
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "plan/planner.h"

namespace strider::plan_internal {

// Where a value's bytes come from, decided before any offset is known.
struct Decision {
  ValueRole role = ValueRole::kOwn;
  ValueId alias_of = kNoValue;  // source value (view, in place) or the Concat output
  int64_t concat_axis = 0;      // kConcatPart: the slice of alias_of along this axis
  int64_t concat_offset = 0;
  bool materialized = false;    // a view op that must copy (its input admits no view)
  ValueId through = kNoValue;   // kPlacedThrough: the Transpose output between it and alias_of
};

struct PlannerState {
  Graph& graph;
  const DeviceCapabilities& capabilities;
  const PlanOptions& options;
  LayoutChoice layout = LayoutChoice::kNchw;

  std::vector<Decision> decisions;               // per value
  std::vector<std::vector<NodeId>> consumers;    // per value
  std::vector<bool> is_graph_input, is_graph_output, used;
  std::vector<bool> dense_node;                  // per node: refused non-packed operands
  std::vector<bool> channels_last;               // per value: an image, in the nhwc layout (layout.cc)

  // Resolution results: each used value's view on a virtual allocation of its buffer.
  std::vector<std::unique_ptr<Allocation>> virtual_allocations;  // one per buffer
  std::vector<std::optional<TensorView>> virtual_views;          // per value
  std::vector<int> buffer_of;                                    // per value
  std::vector<PlanBuffer> buffers;

  PlannerState(Graph& g, const DeviceCapabilities& c, const PlanOptions& o) : graph(g), capabilities(c), options(o) {}
};

// planner.cc
void decide_views(PlannerState& state);
void decide_placed_through(PlannerState& state);
void decide_concats(PlannerState& state);
void decide_in_place(PlannerState& state);
// resolve.cc: computes virtual views and buffers from the decisions.
Status resolve_values(PlannerState& state);
// layout.cc: which values are images and so take channels-last strides in the nhwc layout.
void decide_layouts(PlannerState& state);
// The strides value `v`, owning its bytes, gets: channels-last if decide_layouts said so.
Strides layout_strides(const PlannerState& state, ValueId v);
// arena.cc: lifetimes, best-fit packing; place.cc: views on the plan's placeholders.
void compute_lifetimes(PlannerState& state);
int64_t pack_arena(std::vector<PlanBuffer>& buffers, bool reuse);
int64_t live_bytes_lower_bound(const std::vector<PlanBuffer>& buffers, int num_steps);
Status place(PlannerState& state, Plan& plan);

// The device name placeholder and stand-in allocations carry (they belong to no device).
inline constexpr std::string_view kPlannedDevice = "planned";

inline constexpr int64_t kBufferAlignment = 64;
inline int64_t align_up(int64_t bytes) { return (bytes + kBufferAlignment - 1) / kBufferAlignment * kBufferAlignment; }

}  // namespace strider::plan_internal
