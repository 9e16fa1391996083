// fuse_wavenet_layers: folds a WaveNet layer's gate and the 1x1 convolutions that read it
// into one FusedWaveNetLayer node (ops/wavenet_layer.h), so that the gate G is computed
// and projected in one kernel and never stored (unless something else reads it).
//
// Matched: a FusedGatedConv (passes/fuse_gated_conv.h) over [N, C, T] whose program is
// tanh(first half) * sigmoid(second half) alone, with constant weights [2C, C, K], one
// group, stride 1 and T preserved (WaveNet's chomp already folded into its padding); and
// among the readers of its output G, at most one of each:
//  - the residual: a FusedConv of G with constant weights [C, C, 1] (no padding, stride 1,
//    one group) whose program is its result plus the unit's own input X;
//  - the skip: a plain Conv of G with constant weights [S, C, 1] (no padding, stride 1, one
//    group).
// At least one of them must be found; other readers of G (WaveNet's first skip projection,
// whose FusedConv also sums every layer's skip) read the fused node's G output. The fused
// node takes the gate's place and name; the projections' outputs become its Y and S.
//
// Run after fuse_gated_convs, only for a device with a FusedWaveNetLayer kernel (the
// session checks), for the layers `pays` accepts (Device::fuses_wavenet_layer). Returns
// how many layers it fused.
#pragma once

#include <functional>

#include "ir/graph.h"
#include "ops/wavenet_layer.h"
#include "strider/status.h"

namespace strider {

Result<int> fuse_wavenet_layers(Graph& graph, const std::function<bool(const WaveNetLayerShape&)>& pays = nullptr);

}  // namespace strider
