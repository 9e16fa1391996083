// FusedGatedStack (domain "strider"): a run of gated residual units over each pixel's
// channels, the body of gated stacks (and of WaveNet-style nets whose units are 1x1):
//
//   h_0 = X;   (a_i; b_i) = W_i h_i + B_i;   h_{i+1} = h_i + tanh(a_i) * sigmoid(b_i);   Y = h_n
//
// Each unit is a FusedGatedConv (ops/fused_elementwise.h) of one tap, no padding, stride 1,
// one group, C input and 2C output channels, whose program is the gate plus the unit's own
// input: the fusion pass (passes/fuse_gated_stack.h) folds a chain of those, each read only
// by the next, into one node. A 1x1 convolution mixes only a pixel's channels, so a kernel
// may carry one pixel's h through every unit in registers or shared memory and store Y
// alone: the n - 1 intermediate values (and the 2C channels of each unit) are never
// stored. The intermediates keep f32, whatever X's dtype (as a FusedGatedConv keeps its
// 2C channels unrounded); Y is rounded once, on store.
//
// Inputs: X [N, C, spatial...], then W_i [2C, C, 1, ...] (rank of X) and B_i [2C] (an
// omitted input when the unit had no bias) for each unit in order. One output Y, X's
// shape and dtype. Attribute `nodes`: the folded nodes' names, for errors and inspect.
#pragma once

#include <string_view>
#include <vector>

#include "ir/graph.h"
#include "ops/op_registry.h"

namespace strider {

inline constexpr std::string_view kFusedGatedStackOp = "FusedGatedStack";

// How many units a FusedGatedStack node holds ((inputs - 1) / 2).
int64_t gated_stack_units(const Node& stack);

// The stack of `units` (FusedGatedConv nodes, each the stackable form above, unit i + 1
// reading unit i's output), named after and in the place of the last one.
Node make_gated_stack(const std::vector<const Node*>& units);

OpSchema gated_stack_schema();

}  // namespace strider
