// ScatterND, ScatterElements, GatherND and Dropout (inference), written from the ONNX spec
// over row-major float64/int64 values: the oracle for the devices' kernels.
#include <fmt/format.h>

#include <algorithm>

#include "reference/op_support.h"

namespace strider::ref {
namespace {

std::vector<int64_t> row_major(const Shape& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) strides[d - 1] = strides[d] * shape[d];
  return strides;
}

Result<int64_t> normalized_index(int64_t k, int64_t dim) {
  if (k < -dim || k >= dim) return out_of_range(fmt::format("index {} out of range [{}, {})", k, -dim, dim));
  return k < 0 ? k + dim : k;
}

Result<std::string> reduction_of(const OpContext& ctx) {
  if (ctx.opset() < 16) return std::string("none");
  STRIDER_ASSIGN_OR_RETURN(std::string r, ctx.attributes().get_string("reduction", "none"));
  bool known = r == "none" || r == "add" || r == "mul" || (ctx.opset() >= 18 && (r == "max" || r == "min"));
  if (!known) return invalid_model(fmt::format("attribute 'reduction' '{}' is not known at opset {}", r, ctx.opset()));
  return r;
}

// out[at] combined with updates[from] by `reduction`.
void combine(RefTensor& out, size_t at, const RefTensor& updates, size_t from, const std::string& reduction) {
  if (out.is_floating()) {
    double a = out.floats[at], b = updates.floats[from];
    out.floats[at] = reduction == "add" ? a + b : reduction == "mul" ? a * b : reduction == "max" ? std::max(a, b)
                   : reduction == "min" ? std::min(a, b) : b;
    return;
  }
  int64_t a = out.ints[at], b = updates.ints[from];
  int64_t v = reduction == "add" ? int64_t(uint64_t(a) + uint64_t(b)) : reduction == "mul" ? int64_t(uint64_t(a) * uint64_t(b))
            : reduction == "max" ? std::max(a, b) : reduction == "min" ? std::min(a, b) : b;
  out.ints[at] = wrap_to_dtype(v, out.dtype);
}

struct ScatterInputs {
  const RefTensor *data, *indices, *updates;
  std::vector<int64_t> picks;
  std::string reduction;
};

Result<ScatterInputs> scatter_inputs(const OpContext& ctx) {
  ScatterInputs s;
  STRIDER_ASSIGN_OR_RETURN(s.data, ctx.input(0, "data"));
  STRIDER_ASSIGN_OR_RETURN(s.indices, ctx.input(1, "indices"));
  STRIDER_ASSIGN_OR_RETURN(s.updates, ctx.input(2, "updates"));
  STRIDER_RETURN_IF_ERROR(require_same_dtype(*s.data, *s.updates, "input 0 (data)", "input 2 (updates)"));
  STRIDER_ASSIGN_OR_RETURN(s.picks, read_ints(*s.indices, "input 1 (indices)"));
  STRIDER_ASSIGN_OR_RETURN(s.reduction, reduction_of(ctx));
  return s;
}

Result<OpOutputs> scatter_nd_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(ScatterInputs s, scatter_inputs(ctx));
  const Shape& shape = s.data->shape;
  if (s.indices->rank() < 1) return invalid_model("indices must have rank 1 or more");
  const int64_t k = s.indices->shape.back();
  if (k < 1 || k > s.data->rank()) return invalid_model("indices' last dim must be in [1, rank of data]");
  Shape expected(s.indices->shape.begin(), s.indices->shape.end() - 1);
  expected.insert(expected.end(), shape.begin() + k, shape.end());
  if (s.updates->shape != expected) return invalid_model("updates must have shape indices.shape[:-1] + data.shape[k:]");
  std::vector<int64_t> strides = row_major(shape);
  const int64_t slice = product(shape, size_t(k), shape.size());
  RefTensor out = *s.data;
  for (size_t t = 0; t * size_t(k) < s.picks.size(); ++t) {
    int64_t at = 0;
    for (int64_t j = 0; j < k; ++j) {
      STRIDER_ASSIGN_OR_RETURN(int64_t i, normalized_index(s.picks[t * size_t(k) + size_t(j)], shape[size_t(j)]));
      at += i * strides[size_t(j)];
    }
    for (int64_t e = 0; e < slice; ++e) combine(out, size_t(at + e), *s.updates, t * size_t(slice) + size_t(e), s.reduction);
  }
  return OpOutputs{std::move(out)};
}

Result<OpOutputs> scatter_elements_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(ScatterInputs s, scatter_inputs(ctx));
  STRIDER_ASSIGN_OR_RETURN(int64_t axis_attr, ctx.attributes().get_int("axis", 0));
  STRIDER_ASSIGN_OR_RETURN(int64_t axis, normalized_axis(axis_attr, s.data->rank(), "attribute 'axis'"));
  if (s.indices->shape != s.updates->shape || s.indices->rank() != s.data->rank())
    return invalid_model("indices and updates must have one shape, of data's rank");
  std::vector<int64_t> strides = row_major(s.data->shape);
  RefTensor out = *s.data;
  Status failure;
  for_each_index(s.updates->shape, [&](int64_t flat, const std::vector<int64_t>& index) {
    if (!failure.is_ok()) return;
    Result<int64_t> k = normalized_index(s.picks[size_t(flat)], s.data->shape[size_t(axis)]);
    if (!k.is_ok()) return void(failure = k.status());
    int64_t at = 0;
    for (size_t d = 0; d < index.size(); ++d) {
      if (int64_t(d) != axis && index[d] >= s.data->shape[d]) return void(failure = invalid_model("indices do not fit data"));
      at += (int64_t(d) == axis ? *k : index[d]) * strides[d];
    }
    combine(out, size_t(at), *s.updates, size_t(flat), s.reduction);
  });
  STRIDER_RETURN_IF_ERROR(failure);
  return OpOutputs{std::move(out)};
}

Result<OpOutputs> gather_nd_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* data, ctx.input(0, "data"));
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* indices, ctx.input(1, "indices"));
  STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> picks, read_ints(*indices, "input 1 (indices)"));
  STRIDER_ASSIGN_OR_RETURN(int64_t b, ctx.attributes().get_int("batch_dims", 0));
  const Shape &shape = data->shape, &ishape = indices->shape;
  if (ishape.empty() || b < 0 || b >= int64_t(std::min(shape.size(), ishape.size())))
    return invalid_model("batch_dims must be below the ranks of data and indices");
  const int64_t k = ishape.back();
  if (k < 1 || b + k > data->rank()) return invalid_model("indices' last dim must be in [1, rank - batch_dims]");
  for (int64_t d = 0; d < b; ++d)
    if (shape[size_t(d)] != ishape[size_t(d)]) return invalid_model("batch dims of data and indices differ");
  Shape out_shape(ishape.begin(), ishape.end() - 1);
  out_shape.insert(out_shape.end(), shape.begin() + b + k, shape.end());
  STRIDER_RETURN_IF_ERROR(checked_element_count(out_shape, "output").status());
  std::vector<int64_t> strides = row_major(shape);
  const int64_t slice = product(shape, size_t(b + k), shape.size());
  const int64_t per_batch = product(ishape, size_t(b), ishape.size() - 1);  // tuples per batch entry
  RefTensor out = RefTensor::zeros(data->dtype, out_shape);
  for (size_t t = 0; t * size_t(k) < picks.size(); ++t) {
    int64_t at = (int64_t(t) / std::max<int64_t>(per_batch, 1)) * (b > 0 ? strides[size_t(b) - 1] : 0);
    for (int64_t j = 0; j < k; ++j) {
      STRIDER_ASSIGN_OR_RETURN(int64_t i, normalized_index(picks[t * size_t(k) + size_t(j)], shape[size_t(b + j)]));
      at += i * strides[size_t(b + j)];
    }
    for (int64_t e = 0; e < slice; ++e) {
      size_t o = t * size_t(slice) + size_t(e);
      if (out.is_floating()) out.floats[o] = data->floats[size_t(at + e)];
      else out.ints[o] = data->ints[size_t(at + e)];
    }
  }
  return OpOutputs{std::move(out)};
}

// Dropout in inference: the identity and an all-true mask. Training with a nonzero ratio
// draws random numbers; no oracle can check those, so it is refused.
Result<OpOutputs> dropout_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* x, ctx.input(0, "data"));
  double ratio = 0.5;
  bool training = false;
  if (ctx.opset() < 12) {
    STRIDER_ASSIGN_OR_RETURN(double r, ctx.attributes().get_float("ratio", 0.5f));
    ratio = r;
  } else {
    const RefTensor* r = ctx.optional_input(1);
    const RefTensor* t = ctx.optional_input(2);
    if ((r && r->num_elements() != 1) || (t && t->num_elements() != 1))
      return invalid_model("Dropout's ratio and training_mode must be scalars");
    if (r) ratio = r->element_as_double(0);
    if (t) training = t->element_as_int(0) != 0;
  }
  if (training && ratio != 0.0) return unsupported("Dropout in training mode with a nonzero ratio");
  RefTensor mask = RefTensor::zeros(DType::kBool, x->shape);
  std::fill(mask.ints.begin(), mask.ints.end(), 1);
  return OpOutputs{*x, std::move(mask)};
}

// OneHot: values[1] where the (wrapped) index equals the position along the new axis.
Result<OpOutputs> one_hot_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* indices, ctx.input(0, "indices"));
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* depth_t, ctx.input(1, "depth"));
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* values, ctx.input(2, "values"));
  if (depth_t->num_elements() != 1 || values->num_elements() != 2) return invalid_model("depth must be a scalar, values 2 elements");
  const double depth_value = depth_t->element_as_double(0);
  if (!(depth_value >= 1) || depth_value > 1e12) return invalid_model("depth must be positive");
  const int64_t depth = int64_t(depth_value);
  STRIDER_ASSIGN_OR_RETURN(int64_t axis_attr, ctx.attributes().get_int("axis", -1));
  STRIDER_ASSIGN_OR_RETURN(int64_t axis, normalized_axis(axis_attr, indices->rank() + 1, "attribute 'axis'"));
  Shape shape = indices->shape;
  shape.insert(shape.begin() + axis, depth);
  STRIDER_RETURN_IF_ERROR(checked_element_count(shape, "output").status());
  RefTensor out = RefTensor::zeros(values->dtype, shape);
  const int64_t inner = product(indices->shape, size_t(axis), indices->shape.size());
  for (int64_t o = 0; o < out.num_elements(); ++o) {
    const int64_t position = (o / inner) % depth, source = (o / (inner * depth)) * inner + o % inner;
    int64_t k = indices->element_as_int(source);
    if (k < 0) k += depth;
    const int64_t pick = k == position ? 1 : 0;
    if (out.is_floating()) out.floats[size_t(o)] = values->element_as_double(pick);
    else out.ints[size_t(o)] = values->element_as_int(pick);
  }
  return OpOutputs{std::move(out)};
}

constexpr OpDefinition kScatterOps[] = {
    {"OneHot", 9, 27, one_hot_op},
    {"ScatterND", 11, 27, scatter_nd_op},
    {"ScatterElements", 11, 27, scatter_elements_op},
    {"GatherND", 11, 27, gather_nd_op},
    {"Dropout", 7, 27, dropout_op},
};

}  // namespace

std::span<const OpDefinition> scatter_op_definitions() { return kScatterOps; }

}  // namespace strider::ref
