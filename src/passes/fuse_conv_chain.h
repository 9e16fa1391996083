// fuse_pointwise_depthwise: folds a pointwise convolution (1x1, stride 1, no pads, one
// group; a Conv or a FusedConv whose program reads nothing else) into the depthwise
// convolution that alone reads its output (one group per channel, square kernel), into one
// FusedPointwiseDepthwise node (ops/conv_chain.h) that takes the depthwise node's place.
// The intermediate, a MobileNet block's expanded activations (6x its input), is then never
// a value of the graph: the kernel computes it a band of rows at a time into cache-sized
// scratch (hal/cpu/conv_chain_kernel.cc).
//
// Runs after fuse_conv_activations (so each part already holds its activation), for a
// device with the kernel; `pays(intermediate_bytes)` is the device's answer to whether the
// fused kernel is faster for an intermediate of that size (Device::fuses_pointwise_depthwise).
// Weights must be constants (the kernel reorders them once), dtypes f32 or bf16, images 2-D.
#pragma once

#include <cstdint>
#include <functional>

#include "ir/graph.h"
#include "strider/status.h"

namespace strider {

Result<int> fuse_pointwise_depthwise(Graph& graph, const std::function<bool(int64_t)>& pays);

}  // namespace strider
