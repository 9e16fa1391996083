// The views that data-movement ops make, computed in one place. A view op (an op whose
// OpTraits::view is not kNone: Reshape and its relatives, Transpose, Slice, Split,
// Expand, Gather of a scalar constant index) has outputs that are views of its input 0;
// a Concat's inputs are slices of its output. The planner (plan/resolve.cc) makes these
// views the values' placements, so no kernel runs; when it gives a value bytes of its own
// instead, every device's copy kernel (hal/*/copy_kernels.cc) copies through the same
// view. One function for both means a copy can never move other elements than the view
// the planner would have made.
#pragma once

#include <optional>

#include "memory/tensor_view.h"
#include "ops/op_registry.h"
#include "strider/status.h"

namespace strider {

// The view of `input` (the node's input 0, placed anywhere) that output `output` is, or
// nullopt when none exists (a reshape of strides that do not merge: the planner gives the
// output its own bytes and the copy kernel stages). INTERNAL for an op with no view kind.
Result<std::optional<TensorView>> output_view(const NodeInputs& node, size_t output, const TensorView& input);

// Concat: the slice of the output (placed anywhere) that input `input` fills.
Result<TensorView> concat_part_view(const NodeInputs& node, size_t input, const TensorView& output);

}  // namespace strider
