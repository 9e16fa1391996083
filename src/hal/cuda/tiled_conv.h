// An f32 convolution of strider's own for large outputs: an implicit GEMM on CUDA cores in
// the classic register-tiled form. Why: with TF32 off, f32 convolutions run on f32 FMAs
// (67 TFLOP/s on an H100), and at batch 32 cuDNN's f32 kernels ran YOLOv8n's layers at
// 6-23 TFLOP/s (session 39's profile: 5.2 ms, 0.90x torch.compile); the 3x3 layers of
// 576-2304 inputs a pixel, whose C x KH x KW exceeds the direct kernel's, got 6-9.
//
// How: M = N x OH x OW output pixels, N' = K output channels, K' = C x KH x KW. A block
// computes a tile of kRows pixels x kCols channels (128 x 128, 128 x 64, 64 x 64, 256 x 32 or
// 128 x 32) with 256 threads, each 8 x 8, 8 x 4 or 4 x 4 outputs in registers,
// read from shared memory four at a time (float4). K' runs in slices of 8: the next slice's A
// (the im2col of x, gathered as it is loaded, never stored; 0 outside the image; where each
// input k lies relative to the window's origin comes from a table made once per kernel, so
// a load costs one cached table read, not two integer divisions) and B
// (the weights) are loaded into registers while the current one is multiplied, then
// stored into the other of two shared buffers. Sums in f32 in K' order, then the bias,
// then the activation (launch.h's ConvEpilogue), one store per output.
//
// Contract: x [N, C, H, W] and y [N, K, OH, OW] (1-D with a unit height) are f32 views
// with any element strides, y's addressing distinct elements and not overlapping x's;
// weights are f32 [C * KH * KW][K] row-major and the bias f32 [K] (or null), on the
// device, owned by the caller for the launch's life, and so is the taps table that
// make_tiled_conv_taps fills for these args. M, K' below 2^31. It writes y's elements only,
// each once.
//
// This header is compiled by nvcc and by the host compiler (no fmt).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "hal/cuda/launch.h"

namespace strider::cuda {

// Where input k (channel k / (KH x KW), tap k % (KH x KW)) of a window lies: x's element
// offset from the window's origin, and its row and column offsets for the image's bounds.
struct TiledConvTap {
  int32_t offset = 0;
  int16_t dy = 0, dx = 0;
};

struct TiledConvArgs {
  void* y = nullptr;        // f32 elements
  const void* x = nullptr;
  const float* weights = nullptr;  // [C * KH * KW][K]
  const float* bias = nullptr;     // [K] or null
  const TiledConvTap* taps = nullptr;  // [C * KH * KW], from make_tiled_conv_taps
  int32_t n = 0, c = 0, h = 0, w = 0, k = 0, oh = 0, ow = 0;
  int32_t kh = 0, kw = 0, stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, dilation_h = 1, dilation_w = 1;
  int64_t xs[4] = {}, ys[4] = {};  // element strides of (n, c, h, w)
  ConvEpilogue epilogue;
  // Set by prepare_tiled_conv:
  int32_t pixels = 0, inputs = 0;  // M and K'
  FastDivisor div_ow, div_oh;
};

// A block's tile: 128 x 128 (64 outputs a thread), 128 x 64 (32: layers of 64 or fewer
// output channels, which fill half of a 128-wide tile), 64 x 64 (16: four times the
// blocks, for layers whose big tiles leave SMs idle), 256 x 32 and 128 x 32 (32 and 16: the
// 32-channel layers of YOLOv8n's C2f blocks, which ran at 7.9 TFLOP/s in 64 x 64 tiles).
enum class TiledConvTile : uint8_t { k128x128, k128x64, k64x64, k256x32, k128x32 };
const char* tiled_conv_tile_name(TiledConvTile tile);

struct TiledConvLaunch {
  using Launcher = cudaError_t (*)(const TiledConvArgs&, cudaStream_t);
  Launcher launcher = nullptr;
  TiledConvTile tile = TiledConvTile::k128x128;
  TiledConvArgs args;
};

// The taps table of args' shape and x strides (on the host; the caller uploads it and sets
// args.taps). UNSUPPORTED where an offset does not fit in 32 bits or a window's extent in 16.
Status make_tiled_conv_taps(const TiledConvArgs& args, std::vector<TiledConvTap>* taps);

// Fills the launch's derived fields and picks the instantiation for `tile`; args' shape,
// strides and pointers must be set. UNSUPPORTED for 2^31 output pixels or inputs a pixel.
Status prepare_tiled_conv(TiledConvTile tile, TiledConvLaunch* launch);
Status run_tiled_conv(const TiledConvLaunch& launch, cudaStream_t stream);

}  // namespace strider::cuda
