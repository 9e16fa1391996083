// Matrix products as views, shared by every device: MatMul's operands rank-aligned, and a
// 1x1 convolution seen as a matmul over [rows, channels] views (so it reads and writes
// channel slices of a concat in place: docs/MEMORY_MODEL.md rule 3). Metadata only, no copies.
#pragma once

#include <vector>

#include "ir/attributes.h"
#include "memory/tensor_view.h"
#include "ops/shape_ops.h"

namespace strider {

// Rank-aligned operands [batch..., M, K] x [batch..., K, N] -> [batch..., M, N]; a batch
// dim of size 1 broadcasts.
struct MatMulViews {
  TensorView a, b, out;
};

// The view with a size-1 dim inserted at `at`.
TensorView insert_unit_dim(const TensorView& view, size_t at);

// ONNX MatMul operands (numpy semantics: 1-D operands promoted) as rank-aligned views.
MatMulViews align_matmul(const TensorView& a, const TensorView& b, const TensorView& out);

// Gemm's A' x B' (transA/transB applied as transposed views) and its alpha and beta; C,
// when there is one, is the caller's to shape.
struct GemmViews {
  MatMulViews views;
  float alpha = 1, beta = 1;
};
Result<GemmViews> gemm_views(const AttributeMap& attributes, const TensorView& a, const TensorView& b,
                             const TensorView& out);

// A pointwise convolution as a matmul, with its bias shaped for that matmul.
struct PointwiseMatMul {
  MatMulViews views;
  TensorView bias;  // allocation == nullptr when the convolution has none
  bool row_bias = true;  // bias per output column ([1, N]); false: per output row ([1, M, 1])
};

// The matmul forms of a convolution with 1x1 kernels, unit strides, no padding and one
// group, that these views admit: channels-last ([rows, in] x [in, out] -> [rows, out],
// every (batch, spatial) position a row) first, then channels-first per batch
// ([out, in] x [in, positions]). Empty when the convolution is not pointwise.
std::vector<PointwiseMatMul> pointwise_conv_as_matmul(const TensorView& x, const TensorView& w, const TensorView* bias,
                                                      const TensorView& y, int64_t group, const WindowGeometry& window);

}  // namespace strider
