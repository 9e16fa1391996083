// FusedPointwiseDepthwise (domain "strider"): a pointwise convolution (1x1, stride 1, no
// pads, one group) whose only reader is a depthwise convolution (one group per channel),
// each with an optional activation program that reads nothing else (ReLU6, SiLU): the
// expansion and depthwise steps of a MobileNet inverted residual. The fusion pass
// (passes/fuse_conv_chain.h) makes it for a device that asks for it
// (Device::fuses_pointwise_depthwise), so that a kernel can run the pair band by band with
// the expanded rows kept in cache and never written whole (hal/cpu/conv_chain_kernel.cc).
//
// Meaning: exactly the two convolutions, the first's output (after its program) feeding
// the second. The node is those two nodes folded together, so their meaning stays in one
// place: inputs X, W1, B1, W2, B2 (a bias absent as an omitted input), one output Y, and
// each part's attributes (Conv's or FusedConv's, program included) under the prefixes
// "pointwise." and "depthwise."; split_conv_chain gives the two parts back as nodes of
// their own, which the kernels resolve as any Conv or FusedConv.
#pragma once

#include <string_view>

#include "ir/graph.h"
#include "ops/op_registry.h"
#include "strider/status.h"

namespace strider {

inline constexpr std::string_view kFusedPointwiseDepthwiseOp = "FusedPointwiseDepthwise";

// The two parts as Conv / FusedConv nodes: the pointwise one with inputs X, W1, B1 and no
// output value, the depthwise one with inputs (none: the intermediate), W2, B2 and output Y.
// They are not in any graph: NodeInputs over them reads the chain's graph for W and B.
struct ConvChainParts {
  Node pointwise, depthwise;
};
Result<ConvChainParts> split_conv_chain(const Node& chain);

// The chain node of `pointwise` feeding `depthwise` (their inputs and output as above);
// named after the depthwise node, whose place it takes.
Node make_conv_chain(const Node& pointwise, const Node& depthwise);

OpSchema conv_chain_schema();

}  // namespace strider
