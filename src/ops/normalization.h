// The normalization family, defined once: LayerNormalization, InstanceNormalization,
// GroupNormalization, RMSNormalization and MeanVarianceNormalization all compute, per group
// of elements of x,
//     y = (x - mean) * inv_std * scale + bias,   inv_std = 1 / sqrt(var + epsilon)
// with mean and var over the group's elements (RMSNormalization: no mean, var the mean
// square; MeanVarianceNormalization: 1 / (sqrt(var) + epsilon), no scale or bias). What
// differs is which dims of x a group spans and which dims scale and bias run over, and
// that is all NormalizationParams says. resolve_normalization reads it from the node
// once, with the ONNX defaults, for shape inference and every device's kernel; the
// devices take their views from normalization_views (hal/normalization_views.h).
#pragma once

#include <vector>

#include "ops/op_registry.h"

namespace strider {

struct NormalizationParams {
  // GroupNormalization sees x's dim 1 as [groups, C / groups] (a view: dims split); 0: no.
  int64_t groups = 0;
  // The dims of x (of the grouped view) one group spans, ascending.
  std::vector<int64_t> axes;
  bool subtract_mean = true;          // false: RMSNormalization
  bool epsilon_after_sqrt = false;    // MeanVarianceNormalization's 1 / (sqrt(var) + epsilon)
  float epsilon = 1e-5f;
  int scale_input = -1, bias_input = -1;  // node inputs, -1: none
  // The dims of x (of the grouped view) scale and bias run over; their values are
  // broadcast to those dims' sizes (LayerNormalization), or fill them in row-major order
  // (GroupNormalization-21's [C] over [groups, C / groups]).
  std::vector<int64_t> param_dims;
  // LayerNormalization's Mean and InvStdDev outputs (x's shape with the group dims 1),
  // when the node has them.
  bool has_mean_output = false, has_inv_std_output = false;
};

// INVALID_MODEL naming the attribute or input that does not fit.
Result<NormalizationParams> resolve_normalization(const NodeInputs& node);

// x's shape as the params see it (dim 1 split for GroupNormalization).
Shape normalization_shape(const NormalizationParams& params, const Shape& x);

// The ops of the family, for the registry.
void register_normalization_ops(std::vector<OpSchema>& ops);

}  // namespace strider
