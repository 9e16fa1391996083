#include "hal/normalization_views.h"

#include <fmt/format.h>

#include <algorithm>

namespace strider {
namespace {

// A parameter (scale or bias) as a view over the grouped x's sizes: its values along
// param_dims, stride 0 along the other dims.
Result<TensorView> parameter_over(const NormalizationParams& p, const TensorView& param, const Shape& grouped) {
  Shape target;
  for (int64_t d : p.param_dims) target.push_back(grouped[size_t(d)]);
  TensorView along;
  if (param.rank() == 1 && target.size() == 2 && param.sizes[0] == target[0] * target[1]) {
    std::optional<TensorView> split = reshape_view(param, target);  // [C] over [G, C / G]
    if (!split) return invalid_argument("normalization parameter " + param.to_string() + " cannot be split");
    along = *split;
  } else {
    STRIDER_ASSIGN_OR_RETURN(along, broadcast_view(param, target));
  }
  Strides strides(grouped.size(), 0);
  for (size_t k = 0; k < p.param_dims.size(); ++k) strides[size_t(p.param_dims[k])] = along.strides[k];
  return reinterpret(along, grouped, std::move(strides), 0, "normalization parameter");
}

// A LayerNormalization statistic (x's shape with the group dims 1) over the grouped sizes.
Result<TensorView> statistic_over(const TensorView& stat, const Shape& grouped) {
  return broadcast_view(stat, grouped);
}

}  // namespace

std::array<TensorView, kNormOperands> normalization_operands(const NormalizationParams& p, const KernelRequest& r) {
  std::array<TensorView, kNormOperands> operands;
  operands[kNormX] = r.inputs[0];
  operands[kNormY] = r.outputs[0];
  if (p.scale_input >= 0 && r.has_input(size_t(p.scale_input))) operands[kNormScale] = r.inputs[size_t(p.scale_input)];
  if (p.bias_input >= 0 && r.has_input(size_t(p.bias_input))) operands[kNormBias] = r.inputs[size_t(p.bias_input)];
  if (p.has_mean_output && r.outputs.size() > 1) operands[kNormMean] = r.outputs[1];
  if (p.has_inv_std_output && r.outputs.size() > 2) operands[kNormInvStd] = r.outputs[2];
  return operands;
}

Result<NormalizationViews> normalization_views(const NormalizationParams& p,
                                               const std::array<TensorView, kNormOperands>& operands) {
  const TensorView& x = operands[kNormX];
  const Shape grouped = normalization_shape(p, x.sizes);
  NormalizationViews v;
  v.views = operands;
  std::array<TensorView, kNormOperands> over;
  for (int k : {kNormX, kNormY}) {
    std::optional<TensorView> view = reshape_view(operands[size_t(k)], grouped);
    if (!view) return invalid_argument("cannot split the channels of " + operands[size_t(k)].to_string());
    over[size_t(k)] = *view;
  }
  for (int k : {kNormScale, kNormBias})
    if (operands[size_t(k)].allocation) {
      STRIDER_ASSIGN_OR_RETURN(over[size_t(k)], parameter_over(p, operands[size_t(k)], grouped));
    }
  for (int k : {kNormMean, kNormInvStd})
    if (operands[size_t(k)].allocation) {
      STRIDER_ASSIGN_OR_RETURN(over[size_t(k)], statistic_over(operands[size_t(k)], grouped));
    }
  for (size_t d = 0; d < grouped.size(); ++d) {
    const bool inner = std::binary_search(p.axes.begin(), p.axes.end(), int64_t(d));
    (inner ? v.inner_sizes : v.row_sizes).push_back(grouped[d]);
    for (size_t k = 0; k < size_t(kNormOperands); ++k) {
      const int64_t stride = over[k].allocation ? over[k].strides[d] : 0;
      (inner ? v.inner_strides[k] : v.row_strides[k]).push_back(stride);
    }
  }
  for (int64_t s : v.inner_sizes) v.inner_count *= s;
  return v;
}

}  // namespace strider
