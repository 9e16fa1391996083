// fuse_gated_stacks: folds each chain of gated residual units of one tap into one
// FusedGatedStack node (ops/gated_stack.h), so that a kernel carries every pixel's
// channels through all the units and stores only the last unit's output.
//
// Why: a gated stack's unit is a 1x1 convolution to 2C channels, the gate, and the
// residual add. Fused as FusedGatedConv it is still one kernel per unit whose output the
// next unit reads back from memory; at batch 1 (a few hundred pixels) each such kernel is
// a few microseconds of launch and drain for little work, and at batch 32 every unit
// writes and reads the whole activation. A 1x1 convolution mixes only a pixel's channels,
// so the whole chain is a per-pixel program.
//
// Matched: FusedGatedConv nodes (made by passes/fuse_gated_conv.h) whose convolution has
// one tap, stride 1, no padding and one group, C input and 2C output channels with
// constant weights, whose program is tanh(x0) * sigmoid(x1) plus the node's own input X
// (either order of each operation), and whose output has X's shape and dtype. A unit
// follows another when it reads the other's output as its X and residual and nothing else
// reads that output (nor is it a graph output). Every maximal chain becomes one node, a
// single unit included, for the units `pays` accepts (Device::fuses_gated_stack); the stack
// takes the last unit's place and name.
//
// Run after fuse_gated_convs, only for a device with a FusedGatedStack kernel (the
// session checks), whose fuse_gated_convs was asked to fuse these units too. Returns how
// many stacks it made.
#pragma once

#include <functional>

#include "ir/graph.h"
#include "ops/fused_elementwise.h"
#include "strider/status.h"

namespace strider {

Result<int> fuse_gated_stacks(Graph& graph, const std::function<bool(const GatedConvUnit&)>& pays = nullptr);

}  // namespace strider
