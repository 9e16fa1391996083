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
// A kernel may refuse a view it cannot read or write at full speed (oneDNN picking its
// reference implementation for a channel slice, say). The session then re-plans with that
// node marked `dense`: its inputs are materialized into packed values and its outputs get
// their own buffers. An optimization a kernel cannot honour is simply not made; a packed
// copy never silently stands in for a slice that is written through.
#pragma once

#include <set>

#include "plan/plan.h"

namespace strider {

enum class LayoutChoice : uint8_t { kNchw, kNhwc, kAuto };
// "nchw", "nhwc", "auto"; nullopt for anything else.
std::optional<LayoutChoice> parse_layout(std::string_view text);

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

// Plans `graph` on `device`. May insert Materialize nodes into `graph` for dense_nodes.
Result<Plan> make_plan(Graph& graph, Device& device, const PlanOptions& options);

// The layout `auto` resolves to for this graph on `device`: nhwc when 2-D convolutions
// make up a tenth or more of the nodes and the device prefers channels-last for their dtype.
LayoutChoice resolve_layout(const Graph& graph, LayoutChoice choice, const Device& device);

}  // namespace strider
