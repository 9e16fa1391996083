// A depthwise convolution of strider's own (group == input channels == output channels):
// cuDNN's depthwise kernels in bf16 were the slowest steps of MobileNetV2 on an H200, so
// conv.cc times this one against cuDNN at kernel creation and keeps the faster.
//
// Contract: x [N, C, H, W] and y [N, C, OH, OW] are any strided views (channels-first
// slices, channels-last, offsets); 1-D convolutions come with a unit height. The weights
// and bias are constants, copied once at creation to the device as f32 in [tap][C] order
// (taps of one channel apart, channels of one tap together: neighbouring threads of a
// channels-last output read neighbouring weights). Accumulation is f32 for every storage
// dtype (f32, bf16, f16), then a FusedConv's program over the result (its activation), if
// any. The kernel reads x and the weights and writes only y's elements.
//
// This header is compiled by nvcc and by the host compiler (no fmt).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "hal/cuda/launch.h"

namespace strider::cuda {

struct DepthwiseArgs {
  void* y = nullptr;
  const void* x = nullptr;
  const float* weights = nullptr;  // [KH * KW][C], device memory owned by the kernel object
  const float* bias = nullptr;     // [C] or null
  int32_t n = 0, c = 0, h = 0, w = 0, oh = 0, ow = 0;
  int32_t kh = 0, kw = 0, stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, dilation_h = 1, dilation_w = 1;
  int64_t xs[4] = {}, ys[4] = {};  // element strides of (n, c, h, w)
  bool channels_inner = false;     // y's channel stride is 1: threads run along channels
  int32_t tile_w = 1;              // outputs of one row a thread computes (set by prepare)
  int32_t lanes = 1;               // channels a thread computes (set by prepare: 4 where vectors fit)
  FastDivisor d0, d1, d2;          // the three inner dims of the thread order
  int64_t count = 0;               // threads: output elements / tile_w, rounded up per row
  ConvEpilogue epilogue;           // applied to each output before it is stored
};

struct DepthwiseLaunch {
  using Launcher = cudaError_t (*)(const DepthwiseArgs&, cudaStream_t);
  Launcher launcher = nullptr;
  DepthwiseArgs args;
};

// Picks the instantiation for `dtype` (f32, bf16, f16; UNSUPPORTED otherwise) and the
// thread order; args' shape, strides and pointers must be set. Fewer than 2^31 outputs.
// `vector`: the 4-channel form where the views allow it (args.lanes says whether it did).
// Neither form wins everywhere (the vector one has a quarter of the threads: slower on
// MobileNetV2 at batch 1, faster at 32), so own_conv.cc offers both to the timed choice.
Status prepare_depthwise(DType dtype, bool vector, DepthwiseLaunch* launch);
Status run_depthwise(const DepthwiseLaunch& launch, cudaStream_t stream);

}  // namespace strider::cuda
