// Matrix products through cuBLASLt on strided views: a column chunk of a matrix is a
// leading dimension, a transposed operand a transpose flag, a batch a strided batch, never
// a copy. f32 stays true f32 (CUBLAS_COMPUTE_32F) unless the device allows TF32; bf16 and
// f16 accumulate in f32.
#pragma once

#include <memory>
#include <string>

#include "hal/cuda/cuda_kernels.h"
#include "hal/matmul_views.h"

namespace strider::cuda {

// out = scale * a x b (+ bias, a row [..., 1, N] added to every row, when given).
// UNSUPPORTED when a matrix has neither unit row nor unit column stride, when the output
// is not row-major, when no suffix of the batch dims collapses into one strided batch (the
// dims before it run as one launch each, at most 4096), or when cuBLASLt has no
// algorithm: the planner then packs the operands.
// With `addend`: out = scale * a x b + beta * addend, the addend broadcast to out's sizes;
// read in place as cuBLASLt's C when it has out's dtype and layout (a residual), else
// copied into out first.
// With `time_algorithms` (the default), cuBLASLt's first few algorithms for a large
// product are timed on the views (timed_choice.h) instead of taking its heuristic's first
// pick (lt_matmul.cc says where that paid).
Result<std::unique_ptr<Kernel>> make_lt_matmul(const MatMulViews& views, const TensorView* row_bias, float scale,
                                               const CudaContext& context, const std::string& node,
                                               const TensorView* addend = nullptr, float beta = 0.0f,
                                               bool time_algorithms = true);

}  // namespace strider::cuda
