// The register-tiled f32 convolution (tiled_conv.h): a block's 256 threads as a grid of
// kTx x kTy (16 x 16, or kCols / 4 columns of threads for tiles narrower than 64), thread
// (tx, ty) holding rows ty * 4 + 4 kTy i + {0..3} and columns tx * 4 + 4 kTx j + {0..3} of
// the block's tile, so each reads its operands as float4 from shared memory and a warp's
// reads of A are 2-4 addresses (broadcasts). Loads of a slice into shared memory run along
// the tile's pixels (A) and channels (B): neighbouring threads, neighbouring addresses in an
// NCHW x and in the [K'][K] weights.
#include "hal/cuda/dependent_launch.cuh"
#include "hal/cuda/tiled_conv.h"

namespace strider::cuda {
namespace {

using namespace device;
constexpr int kThreads = 256, kSlice = 8;

template <int kRows, int kCols>
__global__ void __launch_bounds__(kThreads) tiled_conv_kernel(const TiledConvArgs a) {
  order_after_producers();
  constexpr int kTx = kCols >= 64 ? 16 : kCols / 4, kTy = kThreads / kTx;
  constexpr int kRowChunks = kRows / (4 * kTy), kColChunks = kCols / (4 * kTx);
  static_assert(kRowChunks >= 1 && kColChunks >= 1 && kRows % (4 * kTy) == 0 && kCols % (4 * kTx) == 0);
  constexpr int kTileRows = 4 * kRowChunks, kTileCols = 4 * kColChunks;  // a thread's outputs
  constexpr int kALoads = kRows * kSlice / kThreads, kBLoads = kCols * kSlice / kThreads;
  constexpr int kAStep = kThreads / kRows, kBStep = kThreads / kCols;  // slice rows between a thread's loads
  __shared__ __align__(16) float as[2][kSlice][kRows];
  __shared__ __align__(16) float bs[2][kSlice][kCols];

  const int tid = int(threadIdx.x), tx = tid % kTx, ty = tid / kTx;
  const int64_t m0 = int64_t(blockIdx.x) * kRows;
  const int n0 = int(blockIdx.y) * kCols;
  const float* x = static_cast<const float*>(a.x);

  // The pixel this thread gathers A for, fixed over the slices: its image and window origin.
  const int a_row = tid % kRows, a_k = tid / kRows;
  const int64_t pixel = m0 + a_row;
  const bool pixel_inside = pixel < a.pixels;
  const float* window = x;  // x's element at the window's origin, reached only through taps inside the image
  int iy0 = 0, ix0 = 0;
  if (pixel_inside) {
    const uint32_t q0 = fast_divide(uint32_t(pixel), a.div_ow), q1 = fast_divide(q0, a.div_oh);
    const int ox = int(uint32_t(pixel) - q0 * a.div_ow.divisor), oy = int(q0 - q1 * a.div_oh.divisor);
    iy0 = oy * a.stride_h - a.pad_h;
    ix0 = ox * a.stride_w - a.pad_w;
    window = x + (int64_t(q1) * a.xs[0] + int64_t(iy0) * a.xs[2] + int64_t(ix0) * a.xs[3]);
  }
  const int b_col = tid % kCols, b_k = tid / kCols;
  const bool col_inside = n0 + b_col < a.k;

  float a_next[kALoads], b_next[kBLoads];
  auto load = [&](int k0) {
#pragma unroll
    for (int j = 0; j < kALoads; ++j) {
      const int k = k0 + a_k + j * kAStep;
      float v = 0.0f;
      if (pixel_inside && k < a.inputs) {
        const TiledConvTap tap = a.taps[k];  // one address a warp: a broadcast
        if (unsigned(iy0 + tap.dy) < unsigned(a.h) && unsigned(ix0 + tap.dx) < unsigned(a.w)) v = window[tap.offset];
      }
      a_next[j] = v;
    }
#pragma unroll
    for (int j = 0; j < kBLoads; ++j) {
      const int k = k0 + b_k + j * kBStep;
      b_next[j] = col_inside && k < a.inputs ? a.weights[int64_t(k) * a.k + n0 + b_col] : 0.0f;
    }
  };
  auto store = [&](int buffer) {
#pragma unroll
    for (int j = 0; j < kALoads; ++j) as[buffer][a_k + j * kAStep][a_row] = a_next[j];
#pragma unroll
    for (int j = 0; j < kBLoads; ++j) bs[buffer][b_k + j * kBStep][b_col] = b_next[j];
  };

  float acc[kTileRows][kTileCols];
#pragma unroll
  for (int i = 0; i < kTileRows; ++i)
#pragma unroll
    for (int j = 0; j < kTileCols; ++j) acc[i][j] = 0.0f;
  load(0);
  store(0);
  __syncthreads();
  const int slices = (a.inputs + kSlice - 1) / kSlice;
  for (int s = 0; s < slices; ++s) {
    const int buffer = s & 1;
    if (s + 1 < slices) load((s + 1) * kSlice);  // in flight while this slice is multiplied
#pragma unroll
    for (int kk = 0; kk < kSlice; ++kk) {
      float av[kTileRows], bv[kTileCols];
#pragma unroll
      for (int i = 0; i < kRowChunks; ++i) {
        const float4 v = *reinterpret_cast<const float4*>(&as[buffer][kk][i * 4 * kTy + ty * 4]);
        av[4 * i] = v.x, av[4 * i + 1] = v.y, av[4 * i + 2] = v.z, av[4 * i + 3] = v.w;
      }
#pragma unroll
      for (int j = 0; j < kColChunks; ++j) {
        const float4 v = *reinterpret_cast<const float4*>(&bs[buffer][kk][j * 4 * kTx + tx * 4]);
        bv[4 * j] = v.x, bv[4 * j + 1] = v.y, bv[4 * j + 2] = v.z, bv[4 * j + 3] = v.w;
      }
#pragma unroll
      for (int i = 0; i < kTileRows; ++i)
#pragma unroll
        for (int j = 0; j < kTileCols; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
    }
    // The other buffer was last read in slice s - 1, which every thread has finished.
    if (s + 1 < slices) store(buffer ^ 1);
    __syncthreads();
  }

  float* y = static_cast<float*>(a.y);
  with_activation(a.epilogue.activation, [&]<ConvActivation kAct>() {
#pragma unroll
    for (int i = 0; i < kTileRows; ++i) {
      const int64_t p = m0 + (i / 4) * 4 * kTy + ty * 4 + i % 4;
      if (p >= a.pixels) continue;
      const uint32_t q0 = fast_divide(uint32_t(p), a.div_ow), q1 = fast_divide(q0, a.div_oh);
      const int ox = int(uint32_t(p) - q0 * a.div_ow.divisor), oy = int(q0 - q1 * a.div_oh.divisor);
      float* out = y + int64_t(q1) * a.ys[0] + int64_t(oy) * a.ys[2] + int64_t(ox) * a.ys[3];
#pragma unroll
      for (int j = 0; j < kTileCols; ++j) {
        const int channel = n0 + (j / 4) * 4 * kTx + tx * 4 + j % 4;
        if (channel >= a.k) continue;
        const float sum = acc[i][j] + (a.bias ? a.bias[channel] : 0.0f);
        out[int64_t(channel) * a.ys[1]] = apply_activation<kAct>(a.epilogue, sum);
      }
    }
  });
}

template <int kRows, int kCols>
cudaError_t launch_tiled_conv(const TiledConvArgs& a, cudaStream_t stream) {
  const dim3 grid(unsigned((int64_t(a.pixels) + kRows - 1) / kRows), unsigned((a.k + kCols - 1) / kCols));
  const cudaError_t error = launch_dependent(tiled_conv_kernel<kRows, kCols>, grid, dim3(kThreads), 0, stream, a);
  return error != cudaSuccess ? error : cudaGetLastError();
}

}  // namespace

const char* tiled_conv_tile_name(TiledConvTile tile) {
  switch (tile) {
    case TiledConvTile::k128x128: return "128x128";
    case TiledConvTile::k128x64: return "128x64";
    case TiledConvTile::k64x64: return "64x64";
    case TiledConvTile::k256x32: return "256x32";
    case TiledConvTile::k128x32: return "128x32";
  }
  return "?";
}

Status make_tiled_conv_taps(const TiledConvArgs& a, std::vector<TiledConvTap>* taps) {
  taps->clear();
  const int64_t extent_h = int64_t(a.kh - 1) * a.dilation_h, extent_w = int64_t(a.kw - 1) * a.dilation_w;
  if (extent_h > INT16_MAX || extent_w > INT16_MAX) return unsupported("tiled convolution of a window over 32767 wide");
  for (int64_t ch = 0; ch < a.c; ++ch)
    for (int64_t ky = 0; ky < a.kh; ++ky)
      for (int64_t kx = 0; kx < a.kw; ++kx) {
        const int64_t dy = ky * a.dilation_h, dx = kx * a.dilation_w;
        const int64_t offset = ch * a.xs[1] + dy * a.xs[2] + dx * a.xs[3];
        if (offset > INT32_MAX || offset < INT32_MIN) return unsupported("tiled convolution of x offsets over 2^31");
        taps->push_back({int32_t(offset), int16_t(dy), int16_t(dx)});
      }
  return Status::ok();
}

Status prepare_tiled_conv(TiledConvTile tile, TiledConvLaunch* l) {
  TiledConvArgs& a = l->args;
  const int64_t pixels = int64_t(a.n) * a.oh * a.ow, inputs = int64_t(a.c) * a.kh * a.kw;
  if (pixels >= int64_t(INT32_MAX) || inputs >= int64_t(INT32_MAX))
    return unsupported("tiled convolution of 2^31 output pixels or inputs a pixel");
  if (a.k > 65535 * 64) return unsupported("tiled convolution of too many output channels");
  a.pixels = int32_t(pixels), a.inputs = int32_t(inputs);
  a.div_ow = make_fast_divisor(a.ow), a.div_oh = make_fast_divisor(a.oh);
  l->tile = tile;
  switch (tile) {
    case TiledConvTile::k128x128: l->launcher = &launch_tiled_conv<128, 128>; break;
    case TiledConvTile::k128x64: l->launcher = &launch_tiled_conv<128, 64>; break;
    case TiledConvTile::k64x64: l->launcher = &launch_tiled_conv<64, 64>; break;
    case TiledConvTile::k256x32: l->launcher = &launch_tiled_conv<256, 32>; break;
    case TiledConvTile::k128x32: l->launcher = &launch_tiled_conv<128, 32>; break;
  }
  return Status::ok();
}

Status run_tiled_conv(const TiledConvLaunch& l, cudaStream_t stream) {
  if (l.args.pixels == 0 || l.args.k == 0) return Status::ok();
  const cudaError_t error = l.launcher(l.args, stream);
  if (error == cudaSuccess) return Status::ok();
  return device_error(std::string("tiled convolution launch failed: ") + cudaGetErrorString(error));
}

}  // namespace strider::cuda
