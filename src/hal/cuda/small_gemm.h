// A matrix product of strider's own on CUDA cores for products too small to fill the GPU
// with a library's tiles: a transformer's projections at batch 1 ([128, 256] x [256, 1024]
// and the like) ran in cuBLASLt at 11-16 us each in f32 (1-6 TFLOP/s on an H100) because
// its 128 x 128 tiles gave two to eight blocks for 132 SMs, and a fused program after them
// (BERT's erf GELU, the attention scores' scale and mask) cost a launch of its own.
//
// How: one block computes a tile of (8 x rows_per_thread) x 32 outputs with 256 threads in
// four groups of 64; each group accumulates every fourth 32-wide slice of K into registers
// (rows_per_thread x 4 outputs a thread), the next slice loaded while the current one is
// multiplied. The four partial sums meet in shared memory and are added in one fixed
// order, so results do not depend on timing. Small tiles and the split of K make many
// busy blocks out of a small product. Where that still leaves SMs idle or K long, K is
// split further over a cluster of 2-8 blocks (Hopper's thread block clusters): each block
// sums its slices, and the cluster's blocks read each other's sums through distributed
// shared memory, ranks in order, each finishing a share of the tile: one launch, no
// workspace, no atomics, the same bits every run. The timed choice (timed_choice.h) keeps
// cuBLASLt wherever it is faster, which is every large product.
//
// Since session 32 it also runs f32 convolutions at small sizes (own_conv.cc): A is then
// the im2col of x, gathered as the tiles are loaded (SmallGemmWindow), so a 3x3 layer on a
// 10x10 map of 128 channels becomes a [100 x 1152] x [1152 x 128] product split over a
// cluster, where cuDNN's f32 kernels left most SMs idle.
//
// Contract:
// - a [batch..., M, K], b [batch..., K, N], out [batch..., M, N]: any element strides,
//   negative and zero (broadcast) included, except that out's must address distinct
//   elements (it is written once per element, by one thread). At most kSmallGemmBatchDims
//   batch dims, fewer than 65536 batch indices; M, N, K below 2^31.
// - One dtype T for a, b, out and every operand: f32, bf16 or f16. Products and sums in
//   f32; the result is scaled, a bias and a convolution's activation applied where set
//   (the small convolution's), then the program (ops/fused_elementwise.h) runs on it in f32
//   with the product as register `product_register` and each other register read from its
//   view (broadcast to out's sizes), and is rounded to T once.
// - Registers: the program's inputs, at most kMaxFusedInputs; `registers` 0: no program.
//
// This header is compiled by nvcc and by the host compiler (no fmt).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "hal/cuda/launch.h"

namespace strider::cuda {

inline constexpr int kSmallGemmBatchDims = 4;

// A register's view: its address and element strides over out's dims (batch..., M, N).
struct SmallGemmOperand {
  const void* data = nullptr;
  int64_t batch[kSmallGemmBatchDims] = {};
  int64_t row = 0, col = 0;
};

// A convolution as the small product (own_conv.cc's small convolution): A is the im2col of
// one image of x, gathered as it is loaded, never stored: element (m, k) is x[c, oy * stride_h
// - pad_h + ky * dilation_h, ox * stride_w - pad_w + kx * dilation_w] (0 outside the image)
// for m = oy * OW + ox and k = (c * KH + ky) * KW + kx; the batch dim is the image.
struct SmallGemmWindow {
  int32_t taps = 0;  // KH * KW; 0: A is a strided matrix (a_row, a_col)
  int32_t h = 0, w = 0, kw = 1, stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, dilation_h = 1, dilation_w = 1;
  FastDivisor div_taps, div_kw, div_ow;
  int64_t x_c = 0, x_h = 0, x_w = 0;  // x's strides along its channels, height, width
  int64_t y_h = 0, y_w = 0;             // out's strides along its height and width (M's pixel)
};

struct SmallGemmArgs {
  void* out = nullptr;
  const void* a = nullptr;
  const void* b = nullptr;
  int32_t m = 0, n = 0, k = 0;
  int32_t batch_dims = 0;
  int32_t batch_sizes[kSmallGemmBatchDims] = {};
  int64_t a_batch[kSmallGemmBatchDims] = {}, b_batch[kSmallGemmBatchDims] = {}, out_batch[kSmallGemmBatchDims] = {};
  int64_t a_row = 0, a_col = 0;      // a's strides along M and K
  int64_t b_row = 0, b_col = 0;      // b's strides along K and N
  int64_t out_row = 0, out_col = 0;  // out's strides along M and N
  bool a_k_fastest = true;   // how a block reads its tiles: along a's unit stride where it has one
  bool b_n_fastest = true;
  float scale = 1.0f;
  SmallGemmWindow window;
  const float* bias = nullptr;  // [N] (a convolution's), added to the scaled product
  ConvEpilogue epilogue;        // then a convolution's activation, before the program
  int32_t rows_per_thread = 4;  // 1, 2 or 4: a block's tile is 8 x this many rows by 32 columns
  int32_t split = 1;            // 1, 2, 4 or 8 blocks of a cluster share one tile's K
  int32_t batch_count = 1;
  // The program after the product.
  int32_t registers = 0;
  int32_t product_register = 0;
  SmallGemmOperand operands[kMaxFusedInputs];
  FusedCode code;  // its instructions; code.pattern: a compiled form (fused_forms.cuh) or 0
};

struct SmallGemmLaunch {
  using Launcher = cudaError_t (*)(const SmallGemmArgs&, cudaStream_t);
  Launcher launcher = nullptr;
  SmallGemmArgs args;
};

// Blocks the launch has: tiles of out times the batch times the split.
int64_t small_gemm_blocks(const SmallGemmArgs& args);
// Steps of 32 x 4 values of K each block takes (the loads of one in flight during another).
int64_t small_gemm_steps(const SmallGemmArgs& args);

// Picks the instantiation for `dtype` and rows_per_thread; matches the program (code,
// registers) against the compiled forms. UNSUPPORTED outside the contract's sizes.
Status prepare_small_gemm(DType dtype, SmallGemmLaunch* launch);
Status run_small_gemm(const SmallGemmLaunch& launch, cudaStream_t stream);

}  // namespace strider::cuda
