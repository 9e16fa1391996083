// FusedWaveNetLayer (domain "strider"): a WaveNet layer (a gated unit and the 1x1
// convolutions that read its gate) as one node over [N, C, T]:
//
//   (a; b) = Conv(X; Wg, Bg)        2C channels, K taps along T, dilation d, stride 1,
//                                   pad_begin p (causal after a chomp: p = (K - 1) d)
//   G = tanh(a) * sigmoid(b)        C channels
//   Y = X + Conv1x1(G; Wr, Br)      output 0, where the layer has its residual convolution
//   S = Conv1x1(G; Ws, Bs)          output 1, where it has its skip convolution
//   G                               output 2, where something else reads the gate
//
// Why: fused as FusedGatedConv and FusedConv, a layer is still three or four kernels whose
// outputs the next reads back (the gate, the residual, the skip), and at batch 1 each is a
// few microseconds of launch for a [32, 1024] map (session 32: WaveNet at 0.72x of
// torch.compile in f32 at batch 1, 0.90x at batch 32). A 1x1 convolution mixes only a time
// step's channels, so one kernel can compute G for a tile of time steps and both
// projections of it without storing G.
//
// Formed by passes/fuse_wavenet_layer.h from a FusedGatedConv whose program is the gate
// alone and the convolutions reading its output: a FusedConv adding the layer's own input
// (the residual) and a plain Conv (the skip). G stays f32 between the gate and the
// projections whatever X's dtype (the unfused graph rounds it to the storage dtype: the
// fused node is at least as close to the float64 reference); each output is rounded once.
//
// Inputs: X [N, C, T], Wg [2C, C, K], Bg [2C], Wr [C, C, 1], Br [C], Ws [S, C, 1], Bs [S];
// every input after Wg may be omitted (a bias as zeros; Wr with Y, Ws with S absent).
// Outputs Y [N, C, T], S [N, S, T], G [N, C, T], each omitted where nothing reads it (Y
// iff Wr, S iff Ws; at least one output). Attributes: `dilation`, `pad_begin` (the gate
// convolution's, with T preserved: 0 <= pad_begin <= (K - 1) dilation), `nodes` (the
// folded nodes' names, for errors and inspect).
#pragma once

#include <cstdint>
#include <string_view>

#include "ir/graph.h"
#include "ops/fused_elementwise.h"
#include "ops/op_registry.h"

namespace strider {

inline constexpr std::string_view kFusedWaveNetLayerOp = "FusedWaveNetLayer";

// Input and output positions.
enum WaveNetLayerInput : size_t { kWaveX = 0, kWaveGateW, kWaveGateB, kWaveResW, kWaveResB, kWaveSkipW, kWaveSkipB };
enum WaveNetLayerOutput : size_t { kWaveY = 0, kWaveS, kWaveG };

// The gate convolution's geometry along T, resolved once.
struct WaveNetLayerGeometry {
  int64_t channels = 0, skip_channels = 0, taps = 1, dilation = 1, pad_begin = 0;
  // Tap i reads X at t + tap_offset(i) (zeros outside [0, T)).
  int64_t tap_offset(int64_t i) const { return i * dilation - pad_begin; }
};

// What a device decides a layer's fusion by (Device::fuses_wavenet_layer): its gate unit,
// whether the residual projection is in it, and the skip projection's channels (0: none).
struct WaveNetLayerShape {
  GatedConvUnit gate;
  bool residual = false;
  int64_t skip_channels = 0;
};

// Reads a FusedWaveNetLayer's geometry from its attributes and input shapes.
Result<WaveNetLayerGeometry> wavenet_layer_geometry(const Graph& graph, const Node& layer);

OpSchema wavenet_layer_schema();

}  // namespace strider
