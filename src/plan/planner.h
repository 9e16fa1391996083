// The memory planner.
//
// Design. Real runtimes copy at every Split, Slice and Concat; strider's plan makes them
// free, and that is exactly where the bugs this project exists for live: views with
// storage offsets, and producers that write through non-packed slices. So the planner is
// built as a sequence of small decisions, each recorded on the value it concerns, followed
// by one mechanical pass that turns the decisions into TensorViews with the same view
// algebra the kernels trust:
//
//   1. Layout. Every value the planner places gets row-major strides (nchw) or, in nhwc,
//      channels-last strides (dim 1 innermost) if it is an image: a rank-4 or rank-5 value
//      a spatial op reads or writes, or one that reaches such an op through elementwise
//      maps, Concat, Split, Slice or Pad (layout.cc); other values stay row-major.
//      Logical sizes always stay in ONNX order; a layout is only a choice of strides.
//   2. Views. The output of Split, Slice, Reshape, Transpose, Squeeze, Unsqueeze, Flatten,
//      Identity, Expand and Gather-of-a-scalar is a view of its input, unless it is a graph
//      output. A Reshape whose input strides admit no view stays a copy, counted as a
//      materialization.
//   3. Concat in place. Walking Concats from the last, each part that owns its bytes, is
//      produced by a kernel, is neither a graph input nor output and is not yet claimed
//      is placed in its slice of the Concat output, so its producer writes there
//      directly. Chains of concats nest; a part used twice is copied the second time.
//   4. In place. An elementwise output takes over an input with the same sizes and
//      strides that owns its bytes and is read for the last time by this node.
//   5. Resolution. In node order, each value's view is computed from the value it aliases
//      (a view of a view is flattened: it names the root buffer and an absolute offset).
//   6. Buffers and arena. Each root value is a buffer with a lifetime in steps, from its
//      first writer to the last reader of any value in it. Arena buffers are packed
//      best-fit, largest first, into one allocation; a buffer's bytes are reused as soon as
//      its last reader has run, whatever the sizes. Constants, inputs and outputs get an
//      allocation each.
//
// The plan is data, a pure function of the graph, its shapes and the device's planning
// capabilities (DeviceCapabilities, below): it touches no device. Its views lie on four
// placeholder allocations it owns (arena, constants, inputs, outputs: no address); binding
// (plan/bind.h) makes the real allocations, rebases every view onto them and uploads the
// constants. So the planner's tests need no device, and the same plan text comes out
// wherever it is made.
//
// A kernel may refuse a view it cannot read or write at full speed (oneDNN picking its
// reference implementation for a channel slice, say). Whether it does is known only when
// the kernel is made, since the libraries decide per view (cuDNN, cuBLASLt, oneDNN), so
// the session binds, creates every kernel in one sweep, collects every node that refused,
// and plans once more with all of them marked `dense`: their inputs are materialized into
// packed values (Materialize nodes inserted into the planned graph) and their outputs get
// their own buffers. An optimization a kernel cannot honour is simply not made; a packed
// copy never silently stands in for a slice that is written through.
#pragma once

#include <set>

#include "plan/plan.h"

namespace strider {

// The planner's name for the public Layout (strider/options.h; parse_layout is there).
using LayoutChoice = Layout;

struct PlanOptions {
  LayoutChoice layout = LayoutChoice::kAuto;
  bool views = true;
  bool concat_in_place = true;
  bool in_place = true;
  bool reuse_memory = true;  // pack the arena by lifetimes (off: every buffer apart)
  // Run verify_plan (cheap next to planning; off only to look at a broken plan).
  bool verify = true;
  // Nodes whose kernels refused non-packed operands in an earlier attempt.
  std::set<std::string> dense_nodes;
};

// The planner with every optimization off: each value its own bytes, every copy a copy.
PlanOptions unoptimized_plan_options();

// What the planner asks of a device, as data (Device::capabilities() fills it in): the
// plan depends on the device only through these.
struct DeviceCapabilities {
  // Whether convolution-heavy graphs run faster channels-last, per compute dtype.
  bool channels_last_f32 = true;
  bool channels_last_bf16 = true;
  // Whether 1-D convolutions' (N, C, T) values are images too (channels-last in nhwc).
  bool channels_last_1d = false;
  // Whether producers may be placed through a Transpose into a Reshape's bytes (kPlacedThrough).
  bool places_outputs_through_views = true;

  bool prefers_channels_last(DType dtype) const { return dtype == DType::kBF16 ? channels_last_bf16 : channels_last_f32; }
};
DeviceCapabilities capabilities_of(const Device& device);

// A planned graph: the graph as it runs (Materialize nodes inserted for dense_nodes) and
// its plan, whose views refer to `plan.placeholders`.
struct PlannedGraph {
  Graph graph;
  Plan plan;
};

// Plans `graph` for a device with `capabilities`. Pure: no device, no memory but the plan's.
Result<PlannedGraph> make_plan(Graph graph, const DeviceCapabilities& capabilities, const PlanOptions& options);

// The layout `auto` resolves to for this graph: nhwc when 2-D convolutions (and 1-D ones,
// where the device takes those channels-last) make up a tenth or more of the nodes and the
// device prefers channels-last for their dtype.
LayoutChoice resolve_layout(const Graph& graph, LayoutChoice choice, const DeviceCapabilities& capabilities);

}  // namespace strider
