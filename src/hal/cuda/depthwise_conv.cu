// Depthwise convolution (depthwise_conv.h): one thread per output element (or per
// kTileW neighbouring outputs of a row, for 3x3 windows, and of kLanes channels where
// channels-last views allow vector loads), numbered in the output's memory order (channels innermost for a channels-last output, so a warp reads
// 32 neighbouring channels of one pixel and 32 neighbouring weights of one tap; else width
// innermost, so a warp shares one channel's weights and reads a row of pixels). A 3x3
// window is unrolled at compile time; other windows loop.
#include "hal/cuda/dependent_launch.cuh"
#include "hal/cuda/depthwise_conv.h"

namespace strider::cuda {
namespace {

using namespace device;

// Thread `i` -> (n, c, oh, ow0) in the output's memory order, ow0 the first of the
// thread's a.tile_w columns.
__device__ __forceinline__ void coordinates(const DepthwiseArgs& a, uint32_t i, int& n, int& c, int& oh, int& ow0) {
  uint32_t q0 = fast_divide(i, a.d0), r0 = i - q0 * a.d0.divisor;
  uint32_t q1 = fast_divide(q0, a.d1), r1 = q0 - q1 * a.d1.divisor;
  uint32_t q2 = fast_divide(q1, a.d2), r2 = q1 - q2 * a.d2.divisor;
  n = int(q2);
  if (a.channels_inner) {  // (n, oh, ow tile, c)
    c = int(r0), ow0 = int(r1) * a.tile_w, oh = int(r2);
  } else {  // (n, c, oh, ow tile)
    ow0 = int(r0) * a.tile_w, oh = int(r1), c = int(r2);
  }
}

// Any window: one output a thread. With K > 0 the trip counts fold to constants and the
// loops unroll.
template <typename T, int K>
__global__ void __launch_bounds__(kThreads) depthwise_kernel(const DepthwiseArgs a) {
  device::order_after_producers();
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= a.count) return;
  int n, c, oh, ow;
  coordinates(a, uint32_t(i), n, c, oh, ow);
  const int kh = K > 0 ? K : a.kh, kw = K > 0 ? K : a.kw;
  const int h0 = oh * a.stride_h - a.pad_h, w0 = ow * a.stride_w - a.pad_w;
  const Bits<T>* x = static_cast<const Bits<T>*>(a.x) + n * a.xs[0] + c * a.xs[1];
  const float* weights = a.weights + c;
  float acc = a.bias ? __ldg(a.bias + c) : 0.0f;
#pragma unroll
  for (int r = 0; r < kh; ++r) {
    const int ih = h0 + r * a.dilation_h;
    if (ih < 0 || ih >= a.h) continue;
    const Bits<T>* row = x + ih * a.xs[2];
#pragma unroll
    for (int s = 0; s < kw; ++s) {
      const int iw = w0 + s * a.dilation_w;
      if (iw < 0 || iw >= a.w) continue;
      acc = fmaf(to_compute<T>(row[iw * a.xs[3]]), __ldg(weights + int64_t(r * kw + s) * a.c), acc);
    }
  }
  static_cast<Bits<T>*>(a.y)[n * a.ys[0] + c * a.ys[1] + oh * a.ys[2] + ow * a.ys[3]] =
      to_bits<T>(apply_conv_epilogue(a.epilogue, acc));
}

// A 3x3 window of unit width dilation and width stride S: kTileW neighbouring outputs of
// one row a thread, so each input of a window row is loaded once for all of them (6 loads
// a row for 4 outputs at S = 1, instead of 12) and the 9 weights stay in registers.
constexpr int kTileW = 4;

// A tiled thread's outputs: image n, first channel c (of `lanes` channels), row oh, first
// column ow0, and where its window's first tap lies in the input (h0, w0; width stride S).
struct TileStart {
  int n, c, oh, ow0, h0, w0;
};
template <int S>
__device__ __forceinline__ TileStart tile_start(const DepthwiseArgs& a, int64_t i, int lanes) {
  TileStart t;
  coordinates(a, uint32_t(i), t.n, t.c, t.oh, t.ow0);
  t.c *= lanes;
  t.h0 = t.oh * a.stride_h - a.pad_h, t.w0 = t.ow0 * S - a.pad_w;
  return t;
}

template <typename T, int S>
__global__ void __launch_bounds__(kThreads) depthwise_3x3_tiled(const DepthwiseArgs a) {
  device::order_after_producers();
  constexpr int kSpan = (kTileW - 1) * S + 3;
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= a.count) return;
  const auto [n, c, oh, ow0, h0, w0] = tile_start<S>(a, i, 1);
  const Bits<T>* x = static_cast<const Bits<T>*>(a.x) + n * a.xs[0] + c * a.xs[1];
  float wt[9];
#pragma unroll
  for (int t = 0; t < 9; ++t) wt[t] = __ldg(a.weights + int64_t(t) * a.c + c);
  const float bias = a.bias ? __ldg(a.bias + c) : 0.0f;
  float acc[kTileW];
#pragma unroll
  for (int o = 0; o < kTileW; ++o) acc[o] = bias;
#pragma unroll
  for (int r = 0; r < 3; ++r) {
    const int ih = h0 + r * a.dilation_h;
    if (ih < 0 || ih >= a.h) continue;
    const Bits<T>* row = x + ih * a.xs[2];
    float v[kSpan];
#pragma unroll
    for (int j = 0; j < kSpan; ++j) {
      const int iw = w0 + j;
      v[j] = iw >= 0 && iw < a.w ? to_compute<T>(row[iw * a.xs[3]]) : 0.0f;
    }
#pragma unroll
    for (int o = 0; o < kTileW; ++o)
#pragma unroll
      for (int s = 0; s < 3; ++s) acc[o] = fmaf(v[o * S + s], wt[r * 3 + s], acc[o]);
  }
  Bits<T>* y = static_cast<Bits<T>*>(a.y) + n * a.ys[0] + c * a.ys[1] + oh * a.ys[2];
  with_activation(a.epilogue.activation, [&]<ConvActivation kAct>() {
#pragma unroll
    for (int o = 0; o < kTileW; ++o)
      if (ow0 + o < a.ow) y[(ow0 + o) * a.ys[3]] = to_bits<T>(apply_activation<kAct>(a.epilogue, acc[o]));
  });
}

// depthwise_3x3_tiled for channels-last views whose channel runs are kLanes-aligned: a
// thread computes kLanes channels of kTileW neighbouring outputs, each input of a window
// row loaded once as a vector for all of them. Same order of operations per output as the
// scalar forms (bias, then the taps row by row), so the results are bit-identical.
template <typename T, int S>
__global__ void __launch_bounds__(kThreads) depthwise_3x3_lanes(const DepthwiseArgs a) {
  device::order_after_producers();
  constexpr int kSpan = (kTileW - 1) * S + 3;
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= a.count) return;
  const auto [n, c, oh, ow0, h0, w0] = tile_start<S>(a, i, kLanes);
  const Bits<T>* x = static_cast<const Bits<T>*>(a.x) + n * a.xs[0] + c;
  float wt[9][kLanes];
#pragma unroll
  for (int t = 0; t < 9; ++t) {
    const float4 w = __ldg(reinterpret_cast<const float4*>(a.weights + int64_t(t) * a.c + c));
    wt[t][0] = w.x, wt[t][1] = w.y, wt[t][2] = w.z, wt[t][3] = w.w;
  }
  float acc[kTileW][kLanes];
  const float4 b = a.bias ? __ldg(reinterpret_cast<const float4*>(a.bias + c)) : make_float4(0, 0, 0, 0);
#pragma unroll
  for (int o = 0; o < kTileW; ++o) acc[o][0] = b.x, acc[o][1] = b.y, acc[o][2] = b.z, acc[o][3] = b.w;
#pragma unroll
  for (int r = 0; r < 3; ++r) {
    const int ih = h0 + r * a.dilation_h;
    if (ih < 0 || ih >= a.h) continue;
    const Bits<T>* row = x + ih * a.xs[2];
#pragma unroll
    for (int j = 0; j < kSpan; ++j) {
      const int iw = w0 + j;
      float v[kLanes] = {0.0f, 0.0f, 0.0f, 0.0f};
      if (iw >= 0 && iw < a.w) load_lanes<T>(row + iw * a.xs[3], v);
#pragma unroll
      for (int o = 0; o < kTileW; ++o) {
        const int s = j - o * S;  // the tap of output o that input j is, if any
        if (s < 0 || s > 2) continue;
#pragma unroll
        for (int l = 0; l < kLanes; ++l) acc[o][l] = fmaf(v[l], wt[r * 3 + s][l], acc[o][l]);
      }
    }
  }
  Bits<T>* y = static_cast<Bits<T>*>(a.y) + n * a.ys[0] + c + oh * a.ys[2];
  with_activation(a.epilogue.activation, [&]<ConvActivation kAct>() {
#pragma unroll
    for (int o = 0; o < kTileW; ++o) {
      if (ow0 + o >= a.ow) break;
      float out[kLanes];
#pragma unroll
      for (int l = 0; l < kLanes; ++l) out[l] = apply_activation<kAct>(a.epilogue, acc[o][l]);
      store_lanes<T>(y + (ow0 + o) * a.ys[3], out);
    }
  });
}

// The tiled forms' condition (prepare and launch agree on it).
bool tiled_3x3(const DepthwiseArgs& a) {
  return a.kh == 3 && a.kw == 3 && a.dilation_w == 1 && (a.stride_w == 1 || a.stride_w == 2);
}

// The lanes form's condition: channels-last x and y whose every channel run of kLanes
// starts on a vector boundary (sizes, strides and base addresses), for the tiled 3x3.
bool lanes_apply(const DepthwiseArgs& a, size_t element_bytes) {
  if (!a.channels_inner || !tiled_3x3(a) || a.xs[1] != 1 || a.ys[1] != 1 || a.c % kLanes != 0) return false;
  for (int d : {0, 2, 3})
    if (a.xs[d] % kLanes != 0 || a.ys[d] % kLanes != 0) return false;
  const uintptr_t vector_bytes = kLanes * element_bytes;
  return reinterpret_cast<uintptr_t>(a.x) % vector_bytes == 0 && reinterpret_cast<uintptr_t>(a.y) % vector_bytes == 0;
}

template <typename T>
cudaError_t launch_depthwise(const DepthwiseArgs& a, cudaStream_t stream) {
  const unsigned blocks = unsigned((a.count + kThreads - 1) / kThreads);
  if (a.lanes == kLanes && a.stride_w == 1)
    launch_dependent(depthwise_3x3_lanes<T, 1>, blocks, kThreads, 0, stream, a);
  else if (a.lanes == kLanes)
    launch_dependent(depthwise_3x3_lanes<T, 2>, blocks, kThreads, 0, stream, a);
  else if (a.tile_w == kTileW && a.stride_w == 1)
    launch_dependent(depthwise_3x3_tiled<T, 1>, blocks, kThreads, 0, stream, a);
  else if (a.tile_w == kTileW)
    launch_dependent(depthwise_3x3_tiled<T, 2>, blocks, kThreads, 0, stream, a);
  else if (a.kh == 3 && a.kw == 3)
    launch_dependent(depthwise_kernel<T, 3>, blocks, kThreads, 0, stream, a);
  else
    launch_dependent(depthwise_kernel<T, 0>, blocks, kThreads, 0, stream, a);
  return cudaGetLastError();
}

}  // namespace

Status prepare_depthwise(DType dtype, bool vector, DepthwiseLaunch* l) {
  DepthwiseArgs& a = l->args;
  a.tile_w = tiled_3x3(a) ? kTileW : 1;
  a.lanes = vector && lanes_apply(a, dtype_size(dtype)) ? kLanes : 1;
  const int32_t tiles = (a.ow + a.tile_w - 1) / a.tile_w, channel_groups = a.c / a.lanes;
  a.count = int64_t(a.n) * channel_groups * a.oh * tiles;
  if (int64_t(a.n) * a.c * a.oh * a.ow >= int64_t(INT32_MAX))
    return unsupported("depthwise convolution of 2^31 outputs or more");
  if (a.channels_inner) {
    a.d0 = make_fast_divisor(channel_groups), a.d1 = make_fast_divisor(tiles), a.d2 = make_fast_divisor(a.oh);
  } else {
    a.d0 = make_fast_divisor(tiles), a.d1 = make_fast_divisor(a.oh), a.d2 = make_fast_divisor(a.c);
  }
  switch (dtype) {
    case DType::kF32: l->launcher = &launch_depthwise<float>; break;
    case DType::kBF16: l->launcher = &launch_depthwise<__nv_bfloat16>; break;
    case DType::kF16: l->launcher = &launch_depthwise<__half>; break;
    default: return unsupported("depthwise convolution on this dtype");
  }
  return Status::ok();
}

Status run_depthwise(const DepthwiseLaunch& l, cudaStream_t stream) {
  if (l.args.count == 0) return Status::ok();
  cudaError_t error = l.launcher(l.args, stream);
  if (error == cudaSuccess) return Status::ok();
  return device_error(std::string("depthwise convolution launch failed: ") + cudaGetErrorString(error));
}

}  // namespace strider::cuda
