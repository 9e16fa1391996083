// A bf16 / f16 product of strider's own on tensor cores with a program in its epilogue:
// Y = epilogue(A x W), A rows of K elements (any row and batch strides, K contiguous), W
// constant weights repacked once, Y rows of N elements (any row and batch strides, N
// contiguous). Offered by mma_matmul.h next to cuBLASLt for the timed choice to weigh.
//
// Why a second kernel: the pointwise tensor-core convolution (mma_conv.h) took 0.042 ms for
// BERT b32 bf16's up projection where cuBLASLt took 0.007 (plus 0.014 for the GELU pass
// after it): one 64 x 64 tile a block, each step's loads waited for. Here a block computes
// 128 x 128 outputs with 8 warps of 64 x 32, K comes 32 at a time through a three-stage
// cp.async pipeline (two steps' loads in flight while one multiplies), fragments by
// ldmatrix, mma.sync m16n8k16 with f32 accumulation: the way CUTLASS's Ampere GEMMs work,
// which run at most of what mma.sync gives on Hopper.
//
// Contract:
// - A: rows * batch rows; row r of batch b at a + b * a_batch + r * a_row (elements), its K
//   elements contiguous; a, a_batch and a_row multiples of 8 elements (16-byte chunks), K a
//   multiple of 8.
// - weights: device memory owned by the caller, T [n_pad][k_pad] (row j = output column j's
//   K weights), n_pad a multiple of 128, k_pad of 32, zeros past N and K; bias f32 [n_pad]
//   or null.
// - Y: row r of batch b at y + b * y_batch + r * y_row, N contiguous; addends (at most
//   kMaxMmaGemmAddends) with Y's strides. Only Y's elements are written; an addend may be
//   Y's very view (each element is read before the thread that reads it writes it).
// - Accumulation is f32; then bias, the epilogue's activation (launch.h, the conv epilogue's
//   forms and the GELUs) and the addends in f32, rounded to T once.
//
// Compiled by nvcc and the host compiler (no fmt).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "hal/cuda/launch.h"

namespace strider::cuda {

inline constexpr int kMmaGemmTileRows = 128, kMmaGemmTileColumns = 128, kMmaGemmStepK = 32;
inline constexpr int kMaxMmaGemmAddends = 2;

struct MmaGemmArgs {
  void* y = nullptr;
  const void* a = nullptr;
  const void* weights = nullptr;  // T [n_pad][k_pad]
  const float* bias = nullptr;    // [n_pad] or null
  const void* addends[kMaxMmaGemmAddends] = {};
  int32_t addend_count = 0;
  int32_t rows = 0, n = 0, k = 0, k_pad = 0, batch = 1;  // rows a batch element
  int64_t a_batch = 0, a_row = 0, y_batch = 0, y_row = 0;  // element strides
  FastDivisor div_rows;
  ConvEpilogue epilogue;
};

struct MmaGemmLaunch {
  using Launcher = cudaError_t (*)(const MmaGemmArgs&, cudaStream_t);
  Launcher launcher = nullptr;
  MmaGemmArgs args;
};

// The weights' padded sizes for n outputs and k inputs.
inline int64_t mma_gemm_n_pad(int64_t n) { return (n + kMmaGemmTileColumns - 1) / kMmaGemmTileColumns * kMmaGemmTileColumns; }
inline int64_t mma_gemm_k_pad(int64_t k) { return (k + kMmaGemmStepK - 1) / kMmaGemmStepK * kMmaGemmStepK; }

// Checks the contract on args (sizes, strides, alignment), picks the instantiation for
// `dtype` (bf16, f16; UNSUPPORTED otherwise) and allows it its shared memory on the
// current device: call it where the kernel is created, on its device.
Status prepare_mma_gemm(DType dtype, MmaGemmLaunch* launch);
Status run_mma_gemm(const MmaGemmLaunch& launch, cudaStream_t stream);

}  // namespace strider::cuda
