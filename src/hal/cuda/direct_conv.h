// A direct convolution of strider's own for convolutions with few inputs per output
// (input channels x window at most kMaxDirectTaps, one group): the first layer of an
// image net (3 channels, 3x3, stride 2), the 1x1 and dilated Conv1d of gated and WaveNet
// stacks. cuDNN ran these in bf16 at 15-150 GB/s and 1-7 TFLOP/s on an H200 (0.1-0.4 ms a
// layer at batch 32), so conv.cc times this one against cuDNN and cuBLASLt at creation.
//
// Contract: x [N, C, H, W] and y [N, K, OH, OW] are any strided views (1-D with a unit
// height); weights and bias are constants, copied once at creation to the device as f32 in
// groups of kDirectOutputs output channels, [group][C * KH * KW][kDirectOutputs] (zero
// beyond K). One thread computes kDirectOutputs channels of one output pixel from the
// group's weights in shared memory, accumulating in f32 for f32, bf16 and f16 storage;
// a FusedConv's program over the result (its activation) follows, if any; it writes only
// y's elements.
//
// This header is compiled by nvcc and by the host compiler (no fmt).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "hal/cuda/launch.h"

namespace strider::cuda {

inline constexpr int kDirectOutputs = 8;
inline constexpr int kMaxDirectTaps = 1024;  // C * KH * KW: 32 KiB of f32 weights per group

struct DirectConvArgs {
  void* y = nullptr;
  const void* x = nullptr;
  const float* weights = nullptr;  // [ceil(K / kDirectOutputs)][C * KH * KW][kDirectOutputs]
  const float* bias = nullptr;     // [ceil(K / kDirectOutputs) * kDirectOutputs] or null
  int32_t n = 0, c = 0, h = 0, w = 0, k = 0, oh = 0, ow = 0;
  int32_t kh = 0, kw = 0, stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, dilation_h = 1, dilation_w = 1;
  int64_t xs[4] = {}, ys[4] = {};  // element strides of (n, c, h, w)
  FastDivisor div_ow, div_oh;
  int64_t pixels = 0;  // N * OH * OW
  ConvEpilogue epilogue;  // applied to each output before it is stored
  bool chunk_stores = false;  // set by prepare_direct_conv: y's channels contiguous, 16-byte aligned groups
};

struct DirectConvLaunch {
  using Launcher = cudaError_t (*)(const DirectConvArgs&, cudaStream_t);
  Launcher launcher = nullptr;
  DirectConvArgs args;
};

// Picks the instantiation for `dtype` (f32, bf16, f16; UNSUPPORTED otherwise); args'
// shape, strides and pointers must be set. Fewer than 2^31 output pixels.
Status prepare_direct_conv(DType dtype, DirectConvLaunch* launch);
Status run_direct_conv(const DirectConvLaunch& launch, cudaStream_t stream);

}  // namespace strider::cuda
