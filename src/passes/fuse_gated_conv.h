// fuse_gated_convs: folds a gated unit's convolution and its gate into one FusedGatedConv
// node (ops/fused_elementwise.h).
//
// WaveNet's layers and the gated stacks compute z = Conv(x) with 2K output channels, cut
// z into halves a and b along the channels (Split, or two Slices), and combine them
// elementwise (tanh(a) * sigmoid(b), plus a residual): one FusedElementwise after
// fuse_elementwise. Each step alone writes and reads the 2K channels, though only the K
// of the gate's output survive. The fused node computes the gate from the convolution's
// accumulators, so a kernel that holds both halves of a pixel (hal/cuda/mma_conv.h) writes
// only the K channels, in one pass.
//
// Matched: a FusedElementwise reading both halves of one value
// z; z's halves read by nothing else; z the output of a Conv, or of a Slice that drops the
// last m outputs along one spatial axis of a Conv with stride 1 there and end padding of
// at least m (TCN's and WaveNet's "chomp": the Conv then pads m less and computes only
// what survives); none of these values a graph output. The fused node takes the gate's
// place in the node order (its other operands may come after the Conv) and the Conv's
// name.
//
// Run after fuse_elementwise and fuse_conv_activations, only for a device with a
// FusedGatedConv kernel (the session checks), and for each unit only where `pays` says
// the device is faster fused (Device::fuses_gated_conv). Returns how many units it fused.
#pragma once

#include <functional>

#include "ir/graph.h"
#include "ops/fused_elementwise.h"
#include "strider/status.h"

namespace strider {

Result<int> fuse_gated_convs(Graph& graph, const std::function<bool(const GatedConvUnit&)>& pays = nullptr);

}  // namespace strider
