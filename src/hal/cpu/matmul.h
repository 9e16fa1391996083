// Matrix products on strided views, shared by MatMul, Gemm and the 1x1 convolution (which
// is a matmul over [rows, channels] views, and so reads and writes channel slices).
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>

#include "hal/kernel.h"
#include "hal/cpu/onednn.h"
#include "hal/matmul_views.h"

namespace strider::cpu {

// out = scale * a x b (+ bias, a [1, N] or [M, N] view, when given), then `post_ops`.
// oneDNN for f32 and bf16 with positive strides; a naive strided loop otherwise. Refuses
// (UNSUPPORTED) non-packed f32/bf16 views that only a slow path could take, so the planner
// packs them, and post-ops that only a slow path would apply (the caller then runs them as
// its own pass). `constant_b`: b is a constant (weights), which oneDNN may take reordered
// once, at creation, into a layout of its own (the kernel owns that copy).
Result<std::unique_ptr<Kernel>> make_matmul_of(const MatMulViews& views, const TensorView* bias, float scale,
                                               const std::string& node, std::span<const OneDnnPostOp> post_ops = {},
                                               bool constant_b = false);

}  // namespace strider::cpu
