// The small product (small_gemm.h) as kernels for MatMul, Gemm and FusedMatMul nodes: one
// per tile height that could pay, for the timed choice (timed_choice.h) to weigh against
// cuBLASLt. Empty where the product is large (2^20 outputs or more: the library's tiles
// fill the GPU there), where dtypes differ, or where an operand could be read after a
// thread wrote over it (an operand in out's memory that is not out's very view).
// STRIDER_CUDA_SMALL_GEMM=0 (a testing aid, for A/B runs) offers none.
#pragma once

#include <memory>
#include <vector>

#include "hal/cuda/small_gemm.h"
#include "hal/kernel.h"
#include "hal/matmul_views.h"
#include "ops/fused_elementwise.h"

namespace strider::cuda {

// Above this many outputs a library's large tiles already fill the GPU (a transformer's
// products at batch 32 have 4M): the small product is not offered, so nothing is timed.
inline constexpr int64_t kMaxSmallGemmOutputs = int64_t(1) << 20;

// out = program(scale * a x b, operands...): register 0 is the product, registers 1.. the
// operands (any shapes that broadcast to out's). No program: out = scale * a x b.
std::vector<std::unique_ptr<Kernel>> small_matmul_kernels(const MatMulViews& views, float scale,
                                                          const FusedProgram* program,
                                                          const std::vector<TensorView>& operands);

// The small product's launches worth timing for these arguments (sizes, strides,
// pointers set): each tile height that could pay (a smaller one only while the larger
// leaves the GPU short of blocks), whole and with K split over a cluster where K is long
// enough. Also the small convolution's (own_conv.cc).
std::vector<SmallGemmLaunch> small_gemm_launches(const SmallGemmArgs& args, DType dtype);

// A program adding register 1 to register 0: a Gemm's bias as the small product's program.
FusedProgram added_operand_program();

}  // namespace strider::cuda
