// Matrix products on strided views, shared by MatMul, Gemm and the 1x1 convolution (which
// is a matmul over [rows, channels] views, and so reads and writes channel slices).
#pragma once

#include <memory>
#include <string>

#include "hal/kernel.h"

namespace strider::cpu {

// Rank-aligned operands [batch..., M, K] x [batch..., K, N] -> [batch..., M, N]; a batch
// dim of size 1 broadcasts.
struct MatMulViews {
  TensorView a, b, out;
};

// out = scale * a x b (+ bias, a [1, N] or [M, N] view, when given). oneDNN for f32 and bf16
// with positive strides; a naive strided loop otherwise. Refuses (UNSUPPORTED) non-packed
// f32/bf16 views that only a slow path could take, so the planner packs them.
Result<std::unique_ptr<Kernel>> make_matmul_of(const MatMulViews& views, const TensorView* bias, float scale,
                                               const std::string& node);

// The view with a size-1 dim inserted at `at`.
TensorView insert_unit_dim(const TensorView& view, size_t at);

}  // namespace strider::cpu
