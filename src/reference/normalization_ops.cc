// Normalizations (BatchNormalization in inference mode, InstanceNormalization,
// LayerNormalization) and Softmax / LogSoftmax.
#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "base/onnx_types.h"
#include "base/shape.h"
#include "reference/op_support.h"

namespace strider::ref {
namespace {

// Inference mode only: training_mode=1 (opset 14+) or the training outputs (mean, var,
// saved_mean, saved_var before 14) are refused.
Status require_inference_mode(const OpContext& ctx) {
  if (ctx.opset() >= 14) {
    STRIDER_ASSIGN_OR_RETURN(int64_t training, ctx.attributes().get_int("training_mode", 0));
    if (training != 0) return unsupported("training_mode=1 is not supported (inference only)");
  }
  for (size_t i = 1; i < ctx.num_outputs(); ++i)
    if (ctx.has_output(i))
      return unsupported(
          fmt::format("output {} exists only in training mode, which is not supported", i));
  return Status::ok();
}

// y = (x - mean) / sqrt(var + epsilon) * scale + bias per channel (axis 1). Before opset 9,
// spatial=0 gives per-activation statistics shaped like one sample (C x D1 x ...).
Result<OpOutputs> batch_normalization_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* x, ctx.input(0, "X"));
  const char* names[] = {"X", "scale", "B", "input_mean", "input_var"};
  std::vector<const RefTensor*> params;
  for (size_t i = 1; i < 5; ++i) {
    STRIDER_ASSIGN_OR_RETURN(const RefTensor* p, ctx.input(i, names[i]));
    STRIDER_RETURN_IF_ERROR(require_floating(*p, fmt::format("input {} ({})", i, names[i])));
    params.push_back(p);
  }
  STRIDER_RETURN_IF_ERROR(require_floating(*x, "input 0 (X)"));
  STRIDER_RETURN_IF_ERROR(require_inference_mode(ctx));
  STRIDER_ASSIGN_OR_RETURN(double epsilon, ctx.attributes().get_float("epsilon", 1e-5f));
  if (x->rank() < 2)
    return invalid_argument(fmt::format("X {} needs rank >= 2", shape_to_string(x->shape)));
  int64_t spatial = 1;
  if (ctx.opset() < 9) {
    STRIDER_ASSIGN_OR_RETURN(spatial, ctx.attributes().get_int("spatial", 1));
  }
  Shape param_shape =
      spatial != 0 ? Shape{x->shape[1]} : Shape(x->shape.begin() + 1, x->shape.end());
  for (size_t i = 0; i < params.size(); ++i)
    if (params[i]->num_elements() != num_elements(param_shape))
      return invalid_argument(fmt::format("input {} ({}) {} must have {} elements", i + 1,
                                          names[i + 1], shape_to_string(params[i]->shape),
                                          num_elements(param_shape)));
  int64_t per_param = spatial != 0 ? product(x->shape, 2, x->shape.size()) : 1;
  int64_t per_sample = product(x->shape, 1, x->shape.size());
  RefTensor y = *x;
  for (size_t i = 0; i < y.floats.size(); ++i) {
    size_t c = size_t((int64_t(i) % per_sample) / per_param);
    double scale = params[0]->floats[c], bias = params[1]->floats[c];
    double mean = params[2]->floats[c], var = params[3]->floats[c];
    y.floats[i] = (x->floats[i] - mean) / std::sqrt(var + epsilon) * scale + bias;
  }
  return OpOutputs{std::move(y)};
}

// y = (x - mean) / sqrt(var + epsilon) * scale[c] + B[c], statistics per (n, c) over the
// spatial dims.
Result<OpOutputs> instance_normalization_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* x, ctx.input(0, "input"));
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* scale, ctx.input(1, "scale"));
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* bias, ctx.input(2, "B"));
  STRIDER_RETURN_IF_ERROR(require_floating(*x, "input 0 (input)"));
  STRIDER_RETURN_IF_ERROR(require_floating(*scale, "input 1 (scale)"));
  STRIDER_RETURN_IF_ERROR(require_floating(*bias, "input 2 (B)"));
  STRIDER_ASSIGN_OR_RETURN(double epsilon, ctx.attributes().get_float("epsilon", 1e-5f));
  if (x->rank() < 3)
    return invalid_argument(fmt::format("input {} needs rank >= 3", shape_to_string(x->shape)));
  int64_t channels = x->shape[1];
  if (scale->num_elements() != channels || bias->num_elements() != channels)
    return invalid_argument(fmt::format("scale {} and B {} must have {} elements",
                                        shape_to_string(scale->shape), shape_to_string(bias->shape),
                                        channels));
  int64_t size = product(x->shape, 2, x->shape.size());
  RefTensor y = *x;
  for (int64_t plane = 0; plane < x->shape[0] * channels; ++plane) {
    const double* in = x->floats.data() + plane * size;
    double mean = 0, var = 0;
    for (int64_t i = 0; i < size; ++i) mean += in[i];
    mean /= double(size);
    for (int64_t i = 0; i < size; ++i) var += (in[i] - mean) * (in[i] - mean);
    var /= double(size);
    size_t c = size_t(plane % channels);
    for (int64_t i = 0; i < size; ++i)
      y.floats[size_t(plane * size + i)] =
          (in[i] - mean) / std::sqrt(var + epsilon) * scale->floats[c] + bias->floats[c];
  }
  return OpOutputs{std::move(y)};
}

// LayerNormalization (opset 17): statistics over the dims from `axis` on; Scale and B
// broadcast to those dims. Outputs Y, Mean and InvStdDev (the latter two keep rank).
Result<OpOutputs> layer_normalization_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* x, ctx.input(0, "X"));
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* scale, ctx.input(1, "Scale"));
  const RefTensor* bias = ctx.optional_input(2);
  STRIDER_RETURN_IF_ERROR(require_floating(*x, "input 0 (X)"));
  STRIDER_RETURN_IF_ERROR(require_floating(*scale, "input 1 (Scale)"));
  if (bias != nullptr) STRIDER_RETURN_IF_ERROR(require_floating(*bias, "input 2 (B)"));
  STRIDER_ASSIGN_OR_RETURN(int64_t axis_attr, ctx.attributes().get_int("axis", -1));
  STRIDER_ASSIGN_OR_RETURN(int64_t axis, normalized_axis(axis_attr, x->rank(), "attribute 'axis'"));
  STRIDER_ASSIGN_OR_RETURN(double epsilon, ctx.attributes().get_float("epsilon", 1e-5f));
  Shape normalized(x->shape.begin() + axis, x->shape.end());
  // Indexed by position, not by pointer: a model may feed one value as both Scale and B.
  std::vector<int64_t> from[2];
  const RefTensor* params[2] = {scale, bias};
  for (size_t k = 0; k < 2; ++k) {
    if (params[k] == nullptr) continue;
    Shape b;
    if (!broadcast_shapes(params[k]->shape, normalized, &b) || b != normalized)
      return invalid_argument(fmt::format("{} does not broadcast to the normalized dims {}",
                                          describe(*params[k]), shape_to_string(normalized)));
    from[k] = broadcast_source_index(params[k]->shape, normalized);
  }
  const std::vector<int64_t>&from_scale = from[0], &from_bias = from[1];
  int64_t size = num_elements(normalized), groups = product(x->shape, 0, size_t(axis));
  Shape stat_shape = x->shape;
  for (size_t d = size_t(axis); d < stat_shape.size(); ++d) stat_shape[d] = 1;
  STRIDER_ASSIGN_OR_RETURN(int64_t stash_type, ctx.attributes().get_int("stash_type", 1));
  std::optional<DType> stat_dtype = dtype_from_onnx_code(int(stash_type));
  if (!stat_dtype || !is_floating(*stat_dtype))
    return invalid_model(
        fmt::format("attribute 'stash_type' {} is not a floating type", stash_type));
  RefTensor y = *x, mean_out = RefTensor::zeros(*stat_dtype, stat_shape), inv_out = mean_out;
  for (int64_t gi = 0; gi < groups; ++gi) {
    const double* in = x->floats.data() + gi * size;
    double mean = 0, var = 0;
    for (int64_t i = 0; i < size; ++i) mean += in[i];
    mean /= double(size);
    for (int64_t i = 0; i < size; ++i) var += (in[i] - mean) * (in[i] - mean);
    double inv_std = 1.0 / std::sqrt(var / double(size) + epsilon);
    for (int64_t i = 0; i < size; ++i) {
      double v = (in[i] - mean) * inv_std * scale->floats[size_t(from_scale[size_t(i)])];
      y.floats[size_t(gi * size + i)] =
          v + (bias ? bias->floats[size_t(from_bias[size_t(i)])] : 0.0);
    }
    mean_out.floats[size_t(gi)] = mean;
    inv_out.floats[size_t(gi)] = inv_std;
  }
  return OpOutputs{std::move(y), std::move(mean_out), std::move(inv_out)};
}

// Softmax or LogSoftmax over `dim` elements spaced `inner` apart, for each of `outer` groups.
void softmax_groups(RefTensor& y, int64_t outer, int64_t dim, int64_t inner, bool log) {
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t in = 0; in < inner; ++in) {
      auto at = [&](int64_t i) -> double& { return y.floats[size_t((o * dim + i) * inner + in)]; };
      double max = -std::numeric_limits<double>::infinity();
      for (int64_t i = 0; i < dim; ++i) max = std::max(max, at(i));
      double sum = 0;
      for (int64_t i = 0; i < dim; ++i) sum += std::exp(at(i) - max);
      for (int64_t i = 0; i < dim; ++i)
        at(i) = log ? at(i) - max - std::log(sum) : std::exp(at(i) - max) / sum;
    }
  }
}

// Before opset 13 the input is coerced to 2-D at `axis` (default 1) and each row is
// normalized; from 13 the op runs along `axis` (default -1).
Result<OpOutputs> softmax_family(const OpContext& ctx, bool log) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* x, ctx.input(0, "input"));
  STRIDER_RETURN_IF_ERROR(require_floating(*x, "input 0 (input)"));
  bool coerce = ctx.opset() < 13;
  STRIDER_ASSIGN_OR_RETURN(int64_t axis_attr, ctx.attributes().get_int("axis", coerce ? 1 : -1));
  if (x->rank() == 0) return invalid_argument("input must have rank >= 1");
  STRIDER_ASSIGN_OR_RETURN(int64_t axis, normalized_axis(axis_attr, x->rank(), "attribute 'axis'"));
  RefTensor y = *x;
  // An empty input's other dims may be huge ([3, 0, 2^32]): nothing to do, and no loop
  // over them (the same early exit in Concat, Split and Gather below).
  if (x->num_elements() == 0) return OpOutputs{std::move(y)};
  size_t a = size_t(axis), r = x->shape.size();
  if (coerce) {
    softmax_groups(y, product(x->shape, 0, a), product(x->shape, a, r), 1, log);
  } else {
    softmax_groups(y, product(x->shape, 0, a), x->shape[a], product(x->shape, a + 1, r), log);
  }
  return OpOutputs{std::move(y)};
}

Result<OpOutputs> softmax_op(const OpContext& ctx) { return softmax_family(ctx, false); }
Result<OpOutputs> log_softmax_op(const OpContext& ctx) { return softmax_family(ctx, true); }

// Hardmax: 1 at the first maximum of each group (the softmax groups: before opset 13 the
// input flattened to 2-D at `axis`, from 13 along `axis`), 0 elsewhere.
Result<OpOutputs> hardmax_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* x, ctx.input(0, "input"));
  STRIDER_RETURN_IF_ERROR(require_floating(*x, "input 0 (input)"));
  const bool coerce = ctx.opset() < 13;
  STRIDER_ASSIGN_OR_RETURN(int64_t axis_attr, ctx.attributes().get_int("axis", coerce ? 1 : -1));
  if (x->rank() == 0) return invalid_argument("input must have rank >= 1");
  STRIDER_ASSIGN_OR_RETURN(int64_t axis, normalized_axis(axis_attr, x->rank(), "attribute 'axis'"));
  const size_t a = size_t(axis), r = x->shape.size();
  const int64_t outer = product(x->shape, 0, a);
  const int64_t dim = coerce ? product(x->shape, a, r) : x->shape[a], inner = coerce ? 1 : product(x->shape, a + 1, r);
  RefTensor y = RefTensor::zeros(x->dtype, x->shape);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t in = 0; in < inner; ++in) {
      int64_t best = 0;
      for (int64_t i = 1; i < dim; ++i)
        if (x->floats[size_t((o * dim + i) * inner + in)] > x->floats[size_t((o * dim + best) * inner + in)]) best = i;
      if (dim > 0) y.floats[size_t((o * dim + best) * inner + in)] = 1.0;
    }
  return OpOutputs{std::move(y)};
}

constexpr OpDefinition kNormalizationOps[] = {
    {"BatchNormalization", 7, 27, batch_normalization_op},
    {"InstanceNormalization", 7, 27, instance_normalization_op},
    {"LayerNormalization", 17, 27, layer_normalization_op},
    {"Softmax", 7, 27, softmax_op},
    {"LogSoftmax", 7, 27, log_softmax_op},
    {"Hardmax", 7, 27, hardmax_op},
};

}  // namespace

std::span<const OpDefinition> normalization_op_definitions() { return kNormalizationOps; }

}  // namespace strider::ref
