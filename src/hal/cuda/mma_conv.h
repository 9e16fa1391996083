// A convolution of strider's own on tensor cores for bf16 and f16 channels-last
// activations whose window is one row of taps: pointwise (1x1) convolutions of 2-D and 1-D
// nets (MobileNetV2's expansions and projections, gated stacks, WaveNet's residual and skip
// convolutions) and 1-D convolutions of a few taps with any stride, padding and dilation
// (WaveNet's dilated layers). On an H100 these ran as cuBLASLt + a cuDNN bias + a map
// (three passes, 250-700 GB/s) or in the direct kernel on CUDA cores (110 GB/s, 5 TFLOP/s);
// they are a GEMM of pixels x input channels by input channels x output channels per tap.
//
// Contract:
// - x [N, C, H, W] and y [N, K, OH, OW] (1-D with a unit height) are channels-last views
//   (channel stride 1). x's other strides and its offset are multiples of 8 elements and C
//   is too (16-byte rows, read in chunks); y's are any (stored in 16-byte chunks where
//   they allow). Any pixel strides (channel slices of a concat, padded rows); only y's
//   elements are written.
// - The window: kh = 1, stride_h = 1, pad_h = 0 (so OH = H); along the width any stride,
//   padding and dilation, kw <= kMaxMmaConvTaps. Taps outside the input read zeros.
// - weights: device memory owned by the caller, T [ceil(K / 64) * 64][kw][c_pad] (c_pad = C
//   rounded up to 64), zero beyond K and C; bias f32 [ceil(K / 64) * 64] or null.
// - Accumulation is f32; then bias, the epilogue's activation, and up to two addends (views
//   with y's strides, a residual) are applied in f32 and the sum rounded to T once.
// - gated (FusedGatedConv): the convolution has 2K output channels a and b and y [N, K, ...]
//   receives tanh(a) * sigmoid(b) (then the addends); the weights' and bias's tiles hold 32
//   channels of a then the same 32 of b.
// - One block computes 64 pixels x 64 rows of weights (output channels, or 32 gated
//   pairs); 4 warps of 16 pixels each.
//
// This header is compiled by nvcc and by the host compiler (no fmt).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "hal/cuda/launch.h"

namespace strider::cuda {

inline constexpr int kMmaConvTile = 64;  // pixels, output channels and input channels a step
inline constexpr int kMaxMmaConvTaps = 8;
inline constexpr int kMaxMmaConvAddends = 2;

struct MmaConvArgs {
  void* y = nullptr;
  const void* x = nullptr;
  const void* weights = nullptr;  // T [mma_conv_tiles * 64][kw][c_pad]
  const float* bias = nullptr;    // [mma_conv_tiles * 64] or null
  const void* addends[kMaxMmaConvAddends] = {};
  int32_t addend_count = 0;
  int32_t n = 0, c = 0, c_pad = 0, h = 0, w = 0, oh = 0, ow = 0;
  int32_t k = 0;  // y's channels (half the convolution's when gated)
  bool gated = false;
  int32_t kw = 1, stride_w = 1, pad_w = 0, dilation_w = 1;
  int32_t kh = 1, stride_h = 1, pad_h = 0, dilation_h = 1;  // the height's window: 1, 1, 0 (checked)
  int64_t xs[4] = {}, ys[4] = {};  // element strides of (n, c, h, w)
  FastDivisor div_ow, div_oh;
  int64_t pixels = 0;  // N * OH * OW
  // y's strides (of dims above 1), its address, the addends' and K in whole 16-byte chunks:
  // eight channels in one store.
  bool chunk_stores = false;
  ConvEpilogue epilogue;
};

// Tiles of 64 weight rows: of 64 output channels, or of 32 gated pairs.
inline int64_t mma_conv_tiles(const MmaConvArgs& a) {
  const int64_t per_tile = a.gated ? kMmaConvTile / 2 : kMmaConvTile;
  return (a.k + per_tile - 1) / per_tile;
}

struct MmaConvLaunch {
  using Launcher = cudaError_t (*)(const MmaConvArgs&, cudaStream_t);
  Launcher launcher = nullptr;
  MmaConvArgs args;
};

// Whether a 4-D view of these sizes, element strides and base element offset is
// channels-last, its strides (of dims above 1) are not negative and, with `multiple` > 1,
// they and the offset are multiples of it: 8 for 16-byte rows.
bool mma_conv_rows(const int64_t (&sizes)[4], const int64_t (&strides)[4], int64_t offset, int64_t multiple);

// Picks the instantiation for `dtype` (bf16, f16; UNSUPPORTED otherwise) after checking the
// contract above on args' shape, window and strides. Fewer than 2^31 output pixels.
Status prepare_mma_conv(DType dtype, MmaConvLaunch* launch);
Status run_mma_conv(const MmaConvLaunch& launch, cudaStream_t stream);

}  // namespace strider::cuda
