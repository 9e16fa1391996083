// GroupNormalization, RMSNormalization and MeanVarianceNormalization in float64, from the
// ONNX operator definitions (LayerNormalization and InstanceNormalization are in
// normalization_ops.cc). Independent of ops/normalization.h, which the devices share.
#include <fmt/format.h>

#include <cmath>
#include <map>

#include "base/shape.h"
#include "reference/op_support.h"

namespace strider::ref {
namespace {

// GroupNormalization: x [N, C, ...] in `groups` groups of C / groups channels; statistics
// per (n, group); scale and bias per group (opset 18) or per channel (21).
Result<OpOutputs> group_normalization_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* x, ctx.input(0, "X"));
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* scale, ctx.input(1, "scale"));
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* bias, ctx.input(2, "bias"));
  STRIDER_RETURN_IF_ERROR(require_floating(*x, "input 0 (X)"));
  STRIDER_RETURN_IF_ERROR(require_floating(*scale, "input 1 (scale)"));
  STRIDER_RETURN_IF_ERROR(require_floating(*bias, "input 2 (bias)"));
  STRIDER_ASSIGN_OR_RETURN(int64_t groups, ctx.attributes().require_int("num_groups"));
  STRIDER_ASSIGN_OR_RETURN(double epsilon, ctx.attributes().get_float("epsilon", 1e-5f));
  if (x->rank() < 2) return invalid_model("X must have rank 2 or more");
  const int64_t n = x->shape[0], channels = x->shape[1];
  if (groups < 1 || channels % groups) return invalid_model(fmt::format("num_groups {} does not divide {}", groups, channels));
  const int64_t per_group = channels / groups, spatial = x->num_elements() / std::max<int64_t>(n * channels, 1);
  const bool per_channel = ctx.opset() >= 21;
  const int64_t params = per_channel ? channels : groups;
  if (scale->num_elements() != params || bias->num_elements() != params)
    return invalid_model(fmt::format("scale and bias must have {} elements", params));
  RefTensor y = *x;
  const int64_t size = per_group * spatial;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t first = (b * channels + g * per_group) * spatial;
      double mean = 0, var = 0;
      for (int64_t i = 0; i < size; ++i) mean += x->floats[size_t(first + i)];
      mean /= double(size);
      for (int64_t i = 0; i < size; ++i) var += std::pow(x->floats[size_t(first + i)] - mean, 2);
      const double inv_std = 1.0 / std::sqrt(var / double(size) + epsilon);
      for (int64_t i = 0; i < size; ++i) {
        const int64_t p = per_channel ? g * per_group + i / spatial : g;
        y.floats[size_t(first + i)] =
            (x->floats[size_t(first + i)] - mean) * inv_std * scale->floats[size_t(p)] + bias->floats[size_t(p)];
      }
    }
  return OpOutputs{std::move(y)};
}

// Visits the groups of x whose elements share all dims but `reduced`: calls
// fn(indices of the group's elements).
template <typename Fn>
void for_each_group(const Shape& shape, const std::vector<bool>& reduced, Fn fn) {
  std::map<std::vector<int64_t>, std::vector<int64_t>> groups;
  for_each_index(shape, [&](int64_t flat, const std::vector<int64_t>& index) {
    std::vector<int64_t> key;
    for (size_t d = 0; d < index.size(); ++d) key.push_back(reduced[d] ? 0 : index[d]);
    groups[key].push_back(flat);
  });
  for (const auto& [key, members] : groups) fn(members);
}

// RMSNormalization (opset 23): x / sqrt(mean(x^2) + epsilon) * scale over the dims from axis.
Result<OpOutputs> rms_normalization_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* x, ctx.input(0, "X"));
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* scale, ctx.input(1, "scale"));
  STRIDER_RETURN_IF_ERROR(require_floating(*x, "input 0 (X)"));
  STRIDER_RETURN_IF_ERROR(require_floating(*scale, "input 1 (scale)"));
  STRIDER_ASSIGN_OR_RETURN(int64_t axis_attr, ctx.attributes().get_int("axis", -1));
  STRIDER_ASSIGN_OR_RETURN(int64_t axis, normalized_axis(axis_attr, x->rank(), "attribute 'axis'"));
  STRIDER_ASSIGN_OR_RETURN(double epsilon, ctx.attributes().get_float("epsilon", 1e-5f));
  Shape normalized(x->shape.begin() + axis, x->shape.end()), b;
  if (!broadcast_shapes(scale->shape, normalized, &b) || b != normalized)
    return invalid_argument(fmt::format("scale {} does not broadcast to {}", describe(*scale), shape_to_string(normalized)));
  std::vector<int64_t> from_scale = broadcast_source_index(scale->shape, normalized);
  const int64_t size = num_elements(normalized);
  RefTensor y = *x;
  for (int64_t first = 0; first < x->num_elements(); first += size) {
    double square = 0;
    for (int64_t i = 0; i < size; ++i) square += x->floats[size_t(first + i)] * x->floats[size_t(first + i)];
    const double inv = 1.0 / std::sqrt(square / double(size) + epsilon);
    for (int64_t i = 0; i < size; ++i)
      y.floats[size_t(first + i)] = x->floats[size_t(first + i)] * inv * scale->floats[size_t(from_scale[size_t(i)])];
  }
  return OpOutputs{std::move(y)};
}

// MeanVarianceNormalization: (x - mean) / (sqrt(var) + 1e-9) over `axes` (default 0, 2, 3),
// as the ONNX function body computes it.
Result<OpOutputs> mean_variance_normalization_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* x, ctx.input(0, "X"));
  STRIDER_RETURN_IF_ERROR(require_floating(*x, "input 0 (X)"));
  STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> axes, ctx.attributes().get_ints("axes", {0, 2, 3}));
  STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> dims, normalized_axes(axes, x->rank(), "attribute 'axes'"));
  std::vector<bool> reduced(size_t(x->rank()), false);
  for (int64_t d : dims) reduced[size_t(d)] = true;
  RefTensor y = *x;
  for_each_group(x->shape, reduced, [&](const std::vector<int64_t>& members) {
    double mean = 0, var = 0;
    for (int64_t i : members) mean += x->floats[size_t(i)];
    mean /= double(members.size());
    for (int64_t i : members) var += std::pow(x->floats[size_t(i)] - mean, 2);
    const double std_dev = std::sqrt(var / double(members.size()));
    for (int64_t i : members) y.floats[size_t(i)] = (x->floats[size_t(i)] - mean) / (std_dev + 1e-9);
  });
  return OpOutputs{std::move(y)};
}

// LpNormalization: x / ||x||_p along `axis` (p 1 or 2); a vector whose norm is 0 stays 0.
Result<OpOutputs> lp_normalization_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* x, ctx.input(0, "input"));
  STRIDER_RETURN_IF_ERROR(require_floating(*x, "input 0 (input)"));
  STRIDER_ASSIGN_OR_RETURN(int64_t axis_attr, ctx.attributes().get_int("axis", -1));
  STRIDER_ASSIGN_OR_RETURN(int64_t axis, normalized_axis(axis_attr, x->rank(), "attribute 'axis'"));
  STRIDER_ASSIGN_OR_RETURN(int64_t p, ctx.attributes().get_int("p", 2));
  if (p != 1 && p != 2) return invalid_model("p must be 1 or 2");
  const int64_t n = x->shape[size_t(axis)], inner = product(x->shape, size_t(axis) + 1, x->shape.size());
  RefTensor y = *x;
  for (int64_t outer = 0; outer < x->num_elements() / std::max<int64_t>(n * inner, 1); ++outer)
    for (int64_t i = 0; i < inner; ++i) {
      double norm = 0;
      for (int64_t j = 0; j < n; ++j) {
        const double v = x->floats[size_t((outer * n + j) * inner + i)];
        norm += p == 1 ? std::fabs(v) : v * v;
      }
      if (p == 2) norm = std::sqrt(norm);
      for (int64_t j = 0; j < n; ++j) {
        double& v = y.floats[size_t((outer * n + j) * inner + i)];
        v = norm == 0 ? 0.0 : v / norm;
      }
    }
  return OpOutputs{std::move(y)};
}

// LRN: x / (bias + alpha / size * sum of x^2 over channels [c - (size-1)/2, c + size/2])^beta.
Result<OpOutputs> lrn_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* x, ctx.input(0, "X"));
  STRIDER_RETURN_IF_ERROR(require_floating(*x, "input 0 (X)"));
  if (x->rank() < 3) return invalid_model("X must be [N, C, d1, ...]");
  STRIDER_ASSIGN_OR_RETURN(float alpha, ctx.attributes().get_float("alpha", 1e-4f));
  STRIDER_ASSIGN_OR_RETURN(float beta, ctx.attributes().get_float("beta", 0.75f));
  STRIDER_ASSIGN_OR_RETURN(float bias, ctx.attributes().get_float("bias", 1.0f));
  STRIDER_ASSIGN_OR_RETURN(int64_t size, ctx.attributes().require_int("size"));
  if (size < 1) return invalid_model("size must be positive");
  const int64_t n = x->shape[0], c = x->shape[1], inner = product(x->shape, 2, x->shape.size());
  RefTensor y = *x;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t i = 0; i < inner; ++i) {
        double sum = 0;
        for (int64_t k = std::max<int64_t>(0, ch - (size - 1) / 2); k <= std::min(c - 1, ch + size / 2); ++k) {
          const double v = x->floats[size_t((b * c + k) * inner + i)];
          sum += v * v;
        }
        const size_t at = size_t((b * c + ch) * inner + i);
        y.floats[at] = x->floats[at] / std::pow(double(bias) + double(alpha) / double(size) * sum, double(beta));
      }
  return OpOutputs{std::move(y)};
}

constexpr OpDefinition kNormFamilyOps[] = {
    {"GroupNormalization", 18, 27, group_normalization_op},
    {"RMSNormalization", 23, 27, rms_normalization_op},
    {"MeanVarianceNormalization", 9, 27, mean_variance_normalization_op},
    {"LpNormalization", 1, 27, lp_normalization_op},
    {"LRN", 1, 27, lrn_op},
};

}  // namespace

std::span<const OpDefinition> norm_family_op_definitions() { return kNormFamilyOps; }

}  // namespace strider::ref
