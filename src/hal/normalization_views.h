// The operands of a normalization (ops/normalization.h) as every device's kernel walks
// them: a row is one group of elements that share a mean and variance, its elements are
// the inner index. For each operand (x, y, scale, bias, and LayerNormalization's mean and
// inv_std outputs) its strides along the row dims and along the inner dims, so that scale
// varying along a row (LayerNormalization) or across rows (InstanceNormalization), and
// GroupNormalization's split channel dim, are one description. Metadata only, no copies.
#pragma once

#include <array>

#include "hal/kernel.h"
#include "memory/tensor_view.h"
#include "ops/normalization.h"

namespace strider {

enum NormalizationOperand { kNormX, kNormY, kNormScale, kNormBias, kNormMean, kNormInvStd, kNormOperands };

struct NormalizationViews {
  Shape row_sizes, inner_sizes;
  // Element strides per operand; an absent operand (allocation null) has zeros.
  std::array<Strides, kNormOperands> row_strides, inner_strides;
  std::array<TensorView, kNormOperands> views;  // the operands as given (for their data and dtype)
  int64_t inner_count = 1;
};

// A kernel request's views in NormalizationOperand order (absent ones empty).
std::array<TensorView, kNormOperands> normalization_operands(const NormalizationParams& params,
                                                             const KernelRequest& request);

// `operands` in NormalizationOperand order, absent ones with a null allocation. INVALID_ARGUMENT
// when a parameter does not fit the normalized dims (shape inference checked it already).
Result<NormalizationViews> normalization_views(const NormalizationParams& params,
                                               const std::array<TensorView, kNormOperands>& operands);

}  // namespace strider
