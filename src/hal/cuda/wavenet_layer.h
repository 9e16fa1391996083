// FusedWaveNetLayer on the GPU (ops/wavenet_layer.h): a WaveNet layer in one kernel.
//
// A block takes a tile of P time steps ("columns": image and step, consecutive steps of
// one image mostly) and loads, for each tap i, X's C channels at the steps t + offset_i
// into shared memory as f32 (zeros outside [0, T)); the layer's weights are copied into
// shared memory alongside (cp.async) while the tiles load. Thread (k, g) computes channel
// k's gate rows a_k, b_k for its Q columns of group g over every tap and input channel
// (weights stored k-major, so a warp's lanes read neighbouring weights), and puts
// G = tanh(a) * sigmoid(b) in shared memory; after a barrier it projects G: Y = X + Wr G +
// Br and S = Ws G + Bs for its channel. The outputs are stored from shared memory in
// each view's order (channels-last or steps-last). G is stored only where the node has
// its output. Accumulation is f32 FMAs for every storage dtype (f32, bf16, f16).
//
// Why: fused as FusedGatedConv and FusedConv, a WaveNet layer was three or four kernels
// (session 32: 0.15 ms for WaveNet8 at batch 1 in f32, 34 launches), each storing what the
// next reads back.
//
// Contract: x and the outputs are any strided views of [N, C, T] ([N, S, T] for S, with S
// = C here); C <= kWaveNetLayerMaxChannels, taps <= kWaveNetLayerMaxTaps. The weights are
// device memory the kernel object owns (wavenet_layer_kernels.cc), f32: Wg^T [K][C][2C],
// Bg [2C], Wr^T [C][C], Br [C], Ws^T [C][C], Bs [C] (zeros for what the layer lacks).
//
// This header is compiled by nvcc and by the host compiler (no fmt).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "strider/dtype.h"
#include "strider/status.h"

namespace strider::cuda {

inline constexpr int kWaveNetLayerMaxChannels = 64;
inline constexpr int kWaveNetLayerMaxTaps = 3;

// An output's view: its address (null where the node lacks it) and element strides.
struct WaveNetLayerView {
  void* data = nullptr;
  int64_t image = 0, channel = 0, step = 0;
};

struct WaveNetLayerArgs {
  const void* x = nullptr;
  int64_t x_image = 0, x_channel = 0, x_step = 0;
  WaveNetLayerView y, s, g;
  const float* weights = nullptr;
  int32_t c = 0, taps = 0;
  int32_t tap_offset[kWaveNetLayerMaxTaps + 1] = {};  // tile i holds X at t + tap_offset[i]
  int32_t residual_tile = 0;  // the tile at offset 0 (the extra tile `taps` where no tap has one)
  int32_t tiles = 0;          // taps, or taps + 1 with the extra tile
  int32_t groups = 0;         // column groups a block runs: blockDim / C, rounded down
  int32_t q = 1;              // columns a thread carries (set by prepare)
  int64_t steps = 0, columns = 0;  // T and N x T
};

// Floats of the weights (Wg^T, Bg, Wr^T, Br, Ws^T, Bs), rounded up to a multiple of 4 for
// the kernel's 16-byte copies (the host pads with zeros).
__host__ __device__ constexpr int64_t wavenet_layer_weight_floats(int64_t c, int64_t taps) {
  return (2 * c * c * taps + 2 * c + 2 * (c * c + c) + 3) / 4 * 4;
}

// Offsets of the parts in the weights.
__host__ __device__ constexpr int64_t wavenet_gate_bias_at(int64_t c, int64_t taps) { return 2 * c * c * taps; }
__host__ __device__ constexpr int64_t wavenet_residual_at(int64_t c, int64_t taps) { return 2 * c * c * taps + 2 * c; }
__host__ __device__ constexpr int64_t wavenet_skip_at(int64_t c, int64_t taps) {
  return 2 * c * c * taps + 2 * c + c * c + c;
}

// A tile's row stride in shared memory for `columns`: padded so that the channels a warp
// writes fall in different banks, and a multiple of 4 where Q-column vectors are read.
__host__ __device__ constexpr int wavenet_row_stride(int columns, int q) { return q % 4 == 0 ? columns + 4 : columns + 1; }

// The kernel's dynamic shared memory: the weights, each column's image and step, then the
// tiles of X, G and S.
__host__ __device__ constexpr size_t wavenet_layer_shared_bytes(int c, int taps, int tiles, int groups, int q) {
  const int columns = groups * q, padded = (columns + 3) / 4 * 4;
  return size_t(wavenet_layer_weight_floats(c, taps)) * sizeof(float) + size_t(padded) * 2 * sizeof(int32_t) +
         size_t(tiles + 2) * size_t(c) * size_t(wavenet_row_stride(columns, q)) * sizeof(float);
}

struct WaveNetLayerLaunch {
  using Launcher = cudaError_t (*)(const WaveNetLayerArgs&, cudaStream_t);
  Launcher launcher = nullptr;
  WaveNetLayerArgs args;
  int32_t blocks = 0;
  size_t shared = 0;
};

// Picks the instantiation for `dtype` (f32, bf16, f16) and Q for a GPU of `sms`
// multiprocessors, checks the shared memory fits `shared_limit` bytes a block (the
// device's opt-in limit) and lets the kernel use it; args other than groups and q must be
// set. Call where the kernel is created, not during a graph capture. UNSUPPORTED for
// another dtype, C or taps.
Status prepare_wavenet_layer(DType dtype, int sms, size_t shared_limit, WaveNetLayerLaunch* launch);
Status run_wavenet_layer(const WaveNetLayerLaunch& launch, cudaStream_t stream);

}  // namespace strider::cuda
