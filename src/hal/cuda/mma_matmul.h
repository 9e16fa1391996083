// A bf16 / f16 product by constant weights on strider's own tensor-core kernels (the
// pipelined product of mma_gemm.h, "mma-gemm-128", and the pointwise case of mma_conv.h,
// "mma-gemm-64": rows of A as pixels, K as input channels, N as output channels), offered
// to MatMul and FusedMatMul next to cuBLASLt for the timed choice (timed_choice.h) to
// weigh.
//
// Why: cuBLASLt's epilogues have a bias, an addend and GELU in its tanh form only. BERT's
// exact erf GELU, and GPT-2's tanh GELU as torch 1.13 exports it (its own constants), ran as
// the library's product and then a second pass over the product's output: 0.023 ms of each
// BERT b32 bf16 layer's up projection, 0.007 of it the product (H100, session 42). Here the
// bias and the GELU are applied to the f32 accumulators and the output is written once.
//
// Offered where (checked here, the kernel's contract in mma_conv.h):
// - A, B and out have one dtype, bf16 or f16; out is [M, N] or [batch, M, N], A has out's
//   batch, B is one constant matrix (batch dims of 1) whose view is dense ([K, N] rows) or
//   its transpose; the constant is repacked once as the kernel's [N][K] tiles.
// - A's rows and out's rows are dense (stride 1 along K and N), A's strides and offset
//   multiples of 8 elements, K a multiple of 8.
// - The program, if any: added operands (at most one constant bias row and two addends with
//   out's layout, neither overlapping out unless it is out's very view), or BERT's erf
//   GELU or GPT-2's tanh GELU of the product plus a constant bias row, their constants
//   one-element constants.
// Accumulation is f32; bias, GELU and addends are applied in f32 with the map kernels' own
// scalar math and the sum rounded once (the library's path rounds the product first, then
// its program: the two agree within the product's rounding).
//
// Offered only with STRIDER_CUDA_MMA_MATMUL=on. Its first GPU run (session 42, H100) passed
// the kernel suite's TensorCoreProducts, and lost every timed choice on BERT b32 bf16:
// 0.042 ms against cuBLASLt's product and the GELU pass's 0.021 for the up projection,
// 0.019 against 0.007 for the bias-only QKV product. The pointwise kernel's one 64 x 64
// tile a block, staged without a pipeline, reaches about 50 TFLOP/s where cuBLASLt reaches
// 300: timing it costs every session and it wins nothing, so no session times it by
// default. Session 42 then wrote the pipelined product (mma_gemm.h: 128 x 128 tiles, K
// through a three-stage cp.async pipeline), offered first under the same switch; it has
// not run on a GPU yet (the session's device time ran out).
#pragma once

#include <memory>
#include <vector>

#include "hal/kernel.h"
#include "hal/matmul_views.h"
#include "ops/fused_elementwise.h"

namespace strider::cuda {

// The tensor-core product for `views` (out = program(a x b, operands...)), or nothing
// where the conditions above do not hold. `r` gives the constants: B is input 1, program
// register j >= 1 is input j + 1.
std::vector<std::unique_ptr<Kernel>> mma_matmul_kernels(const KernelRequest& r, const MatMulViews& views,
                                                        const FusedProgram* program,
                                                        const std::vector<TensorView>& operands);

}  // namespace strider::cuda
