// Data movement ops: Reshape, Flatten, Squeeze, Unsqueeze, Identity, Transpose, Concat,
// Split, Slice, Gather and Expand. Each computes its output shape from the input values and
// attributes, then moves elements through an explicit source-index map.
#include <fmt/format.h>

#include "base/shape.h"
#include "reference/op_support.h"

namespace strider::ref {
namespace {

RefTensor with_shape(const RefTensor& x, Shape shape) {
  RefTensor y = x;
  y.shape = std::move(shape);
  return y;
}

// Copies `count` elements from src[src_at...] to dst[dst_at...].
void copy_elements(const RefTensor& src, int64_t src_at, RefTensor& dst, int64_t dst_at,
                   int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    if (src.is_floating()) {
      dst.floats[size_t(dst_at + i)] = src.floats[size_t(src_at + i)];
    } else {
      dst.ints[size_t(dst_at + i)] = src.ints[size_t(src_at + i)];
    }
  }
}

// Reshape's target: 0 copies the input dim (unless allow_zero), one -1 is inferred.
Result<Shape> reshape_target(const Shape& in, const std::vector<int64_t>& requested,
                             bool allow_zero) {
  Shape out;
  int64_t inferred_at = -1;
  bool has_zero = false;
  for (size_t i = 0; i < requested.size(); ++i) {
    int64_t d = requested[i];
    if (d == -1) {
      if (inferred_at >= 0) return invalid_argument("input 1 (shape) has more than one -1");
      inferred_at = int64_t(i);
      out.push_back(1);
      continue;
    }
    if (d == 0 && !allow_zero) {
      if (i >= in.size())
        return invalid_argument(
            fmt::format("input 1 (shape)[{}] is 0 (copy the input dim) but the input has rank {}",
                        i, in.size()));
      d = in[i];
    }
    if (d < 0) return invalid_argument(fmt::format("input 1 (shape)[{}] is {}", i, d));
    has_zero = has_zero || d == 0;
    out.push_back(d);
  }
  int64_t total = num_elements(in);
  STRIDER_RETURN_IF_ERROR(checked_element_count(out, "input 1 (shape)"));
  if (inferred_at >= 0) {
    int64_t known = num_elements(out);
    if (has_zero || known == 0)
      return invalid_argument(fmt::format("cannot infer the -1 of {} with a zero-sized dim",
                                          shape_to_string(requested)));
    if (total % known != 0)
      return invalid_argument(fmt::format("cannot reshape {} ({} elements) to {}",
                                          shape_to_string(in), total, shape_to_string(requested)));
    out[size_t(inferred_at)] = total / known;
  }
  if (num_elements(out) != total)
    return invalid_argument(fmt::format("cannot reshape {} ({} elements) to {} ({} elements)",
                                        shape_to_string(in), total, shape_to_string(out),
                                        num_elements(out)));
  return out;
}

Result<OpOutputs> reshape_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* data, ctx.input(0, "data"));
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* shape, ctx.input(1, "shape"));
  STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> requested, read_ints(*shape, "input 1 (shape)"));
  bool allow_zero = false;
  if (ctx.opset() >= 14) {
    STRIDER_ASSIGN_OR_RETURN(int64_t a, ctx.attributes().get_int("allowzero", 0));
    allow_zero = a != 0;
  }
  STRIDER_ASSIGN_OR_RETURN(Shape out, reshape_target(data->shape, requested, allow_zero));
  return OpOutputs{with_shape(*data, std::move(out))};
}

Result<OpOutputs> flatten_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* x, ctx.input(0, "input"));
  STRIDER_ASSIGN_OR_RETURN(int64_t axis, ctx.attributes().get_int("axis", 1));
  int64_t rank = x->rank();
  if (axis < -rank || axis > rank)
    return invalid_model(
        fmt::format("attribute 'axis' {} is out of range [{}, {}]", axis, -rank, rank));
  if (axis < 0) axis += rank;
  Shape out = {product(x->shape, 0, size_t(axis)),
               product(x->shape, size_t(axis), x->shape.size())};
  return OpOutputs{with_shape(*x, std::move(out))};
}

// Squeeze/Unsqueeze axes: an attribute before opset 13, an input from 13.
Result<std::optional<std::vector<int64_t>>> axes_argument(const OpContext& ctx) {
  if (ctx.opset() < 13) {
    if (!ctx.attributes().has("axes")) return std::optional<std::vector<int64_t>>();
    STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> axes, ctx.attributes().require_ints("axes"));
    return std::optional<std::vector<int64_t>>(std::move(axes));
  }
  const RefTensor* axes = ctx.optional_input(1);
  if (axes == nullptr) return std::optional<std::vector<int64_t>>();
  STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> values, read_ints(*axes, "input 1 (axes)"));
  return std::optional<std::vector<int64_t>>(std::move(values));
}

Result<OpOutputs> squeeze_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* x, ctx.input(0, "data"));
  STRIDER_ASSIGN_OR_RETURN(auto axes, axes_argument(ctx));
  std::vector<bool> remove(x->shape.size(), false);
  if (!axes || axes->empty()) {
    for (size_t i = 0; i < x->shape.size(); ++i) remove[i] = x->shape[i] == 1;
  } else {
    STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> normalized,
                             normalized_axes(*axes, x->rank(), "axes"));
    for (int64_t a : normalized) {
      if (x->shape[size_t(a)] != 1)
        return invalid_argument(fmt::format("cannot squeeze axis {} of {}: its size is not 1", a,
                                            shape_to_string(x->shape)));
      remove[size_t(a)] = true;
    }
  }
  Shape out;
  for (size_t i = 0; i < x->shape.size(); ++i)
    if (!remove[i]) out.push_back(x->shape[i]);
  return OpOutputs{with_shape(*x, std::move(out))};
}

Result<OpOutputs> unsqueeze_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* x, ctx.input(0, "data"));
  STRIDER_ASSIGN_OR_RETURN(auto axes, axes_argument(ctx));
  if (!axes) return invalid_model("Unsqueeze needs axes");
  int64_t out_rank = x->rank() + int64_t(axes->size());
  STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> normalized,
                           normalized_axes(*axes, out_rank, "axes"));
  std::vector<bool> inserted(size_t(out_rank), false);
  for (int64_t a : normalized) inserted[size_t(a)] = true;
  Shape out;
  size_t next_input_dim = 0;
  for (size_t i = 0; i < size_t(out_rank); ++i)
    out.push_back(inserted[i] ? 1 : x->shape[next_input_dim++]);
  return OpOutputs{with_shape(*x, std::move(out))};
}

Result<OpOutputs> identity_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* x, ctx.input(0, "input"));
  return OpOutputs{*x};
}

Result<OpOutputs> transpose_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* x, ctx.input(0, "data"));
  size_t rank = x->shape.size();
  std::vector<int64_t> reversed;
  for (size_t i = rank; i-- > 0;) reversed.push_back(int64_t(i));
  STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> perm, ctx.attributes().get_ints("perm", reversed));
  std::vector<bool> seen(rank, false);
  if (perm.size() != rank)
    return invalid_model(
        fmt::format("attribute 'perm' has {} entries for rank {}", perm.size(), rank));
  for (int64_t p : perm) {
    if (p < 0 || p >= int64_t(rank) || seen[size_t(p)])
      return invalid_model(
          fmt::format("attribute 'perm' {} is not a permutation", shape_to_string(perm)));
    seen[size_t(p)] = true;
  }
  Shape out(rank);
  Strides in_strides = contiguous_strides(x->shape);
  for (size_t i = 0; i < rank; ++i) out[i] = x->shape[size_t(perm[i])];
  std::vector<int64_t> source(size_t(num_elements(out)));
  for_each_index(out, [&](int64_t flat, const std::vector<int64_t>& index) {
    int64_t s = 0;
    for (size_t i = 0; i < rank; ++i) s += index[i] * in_strides[size_t(perm[i])];
    source[size_t(flat)] = s;
  });
  return OpOutputs{gather_elements(*x, std::move(out), source)};
}

Result<OpOutputs> concat_op(const OpContext& ctx) {
  if (ctx.num_inputs() == 0) return invalid_model("Concat needs at least one input");
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* first, ctx.input(0, "inputs"));
  STRIDER_ASSIGN_OR_RETURN(int64_t axis_attr, ctx.attributes().require_int("axis"));
  STRIDER_ASSIGN_OR_RETURN(int64_t axis,
                           normalized_axis(axis_attr, first->rank(), "attribute 'axis'"));
  Shape out = first->shape;
  out[size_t(axis)] = 0;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    STRIDER_ASSIGN_OR_RETURN(const RefTensor* x, ctx.input(i, "inputs"));
    std::string what = fmt::format("input {}", i);
    STRIDER_RETURN_IF_ERROR(require_same_dtype(*first, *x, "input 0", what));
    bool compatible = x->rank() == first->rank();
    for (size_t d = 0; compatible && d < out.size(); ++d)
      compatible = int64_t(d) == axis || x->shape[d] == first->shape[d];
    if (!compatible)
      return invalid_argument(
          fmt::format("{} has shape {}, which does not concatenate with {} on axis {}", what,
                      shape_to_string(x->shape), shape_to_string(first->shape), axis));
    out[size_t(axis)] += x->shape[size_t(axis)];
  }
  RefTensor y = RefTensor::zeros(first->dtype, out);
  if (y.num_elements() == 0) return OpOutputs{std::move(y)};  // no loop over an empty output's dims
  int64_t outer = product(out, 0, size_t(axis));
  int64_t out_chunk = product(out, size_t(axis), out.size());
  int64_t offset = 0;  // where this input's chunk starts inside each output chunk
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const RefTensor& x = *ctx.optional_input(i);
    int64_t chunk = product(x.shape, size_t(axis), x.shape.size());
    for (int64_t o = 0; o < outer; ++o)
      copy_elements(x, o * chunk, y, o * out_chunk + offset, chunk);
    offset += chunk;
  }
  return OpOutputs{std::move(y)};
}

// Split sizes: the `split` attribute (before 13) or input (from 13), else `num_outputs`
// (from 18; chunks of ceil(dim / n), the last one smaller), else equal parts.
Result<std::vector<int64_t>> split_sizes(const OpContext& ctx, int64_t dim) {
  int64_t n = int64_t(ctx.num_outputs());
  std::optional<std::vector<int64_t>> split;
  if (ctx.opset() < 13 && ctx.attributes().has("split")) {
    STRIDER_ASSIGN_OR_RETURN(split, ctx.attributes().require_ints("split"));
  } else if (ctx.opset() >= 13 && ctx.has_input(1)) {
    STRIDER_ASSIGN_OR_RETURN(split, read_ints(*ctx.optional_input(1), "input 1 (split)"));
  }
  if (split) {
    int64_t sum = 0;
    bool negative = false;
    for (int64_t s : *split) {
      negative = negative || s < 0;
      sum += s;
    }
    if (int64_t(split->size()) != n || sum != dim || negative)
      return invalid_argument(fmt::format("split {} does not cut a dim of {} into {} outputs",
                                          shape_to_string(*split), dim, n));
    return *split;
  }
  if (ctx.opset() >= 18 && ctx.attributes().has("num_outputs")) {
    STRIDER_ASSIGN_OR_RETURN(int64_t num_outputs, ctx.attributes().require_int("num_outputs"));
    if (num_outputs != n)
      return invalid_model(
          fmt::format("attribute 'num_outputs' is {} but the node has {} outputs", num_outputs, n));
  } else if (n > 0 && dim % n != 0) {
    return invalid_argument(fmt::format("a dim of {} does not split into {} equal parts", dim, n));
  }
  if (n <= 0) return invalid_model("Split needs at least one output");
  int64_t chunk = (dim + n - 1) / n;
  std::vector<int64_t> sizes(size_t(n), chunk);
  sizes.back() = dim - chunk * (n - 1);
  if (sizes.back() < 0)
    return invalid_argument(
        fmt::format("a dim of {} does not split into {} chunks of {}", dim, n, chunk));
  return sizes;
}

Result<OpOutputs> split_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* x, ctx.input(0, "input"));
  STRIDER_ASSIGN_OR_RETURN(int64_t axis_attr, ctx.attributes().get_int("axis", 0));
  STRIDER_ASSIGN_OR_RETURN(int64_t axis, normalized_axis(axis_attr, x->rank(), "attribute 'axis'"));
  STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> sizes, split_sizes(ctx, x->shape[size_t(axis)]));
  int64_t outer = product(x->shape, 0, size_t(axis));
  int64_t inner = product(x->shape, size_t(axis) + 1, x->shape.size());
  int64_t in_chunk = x->shape[size_t(axis)] * inner;
  OpOutputs outputs;
  int64_t begin = 0;
  for (int64_t size : sizes) {
    Shape shape = x->shape;
    shape[size_t(axis)] = size;
    RefTensor y = RefTensor::zeros(x->dtype, shape);
    for (int64_t o = 0; y.num_elements() > 0 && o < outer; ++o)
      copy_elements(*x, o * in_chunk + begin * inner, y, o * size * inner, size * inner);
    outputs.push_back(std::move(y));
    begin += size;
  }
  return outputs;
}

}  // namespace

// Defined in slice_gather_ops.cc.
Result<OpOutputs> slice_op(const OpContext& ctx);
Result<OpOutputs> gather_op(const OpContext& ctx);
Result<OpOutputs> expand_op(const OpContext& ctx);

namespace {

constexpr OpDefinition kTensorOps[] = {
    {"Reshape", 7, 27, reshape_op},   {"Flatten", 7, 27, flatten_op},
    {"Squeeze", 7, 27, squeeze_op},   {"Unsqueeze", 7, 27, unsqueeze_op},
    {"Identity", 7, 27, identity_op}, {"Transpose", 7, 27, transpose_op},
    {"Concat", 7, 27, concat_op},     {"Split", 7, 27, split_op},
    {"Slice", 7, 27, slice_op},       {"Gather", 7, 27, gather_op},
    {"Expand", 8, 27, expand_op},
};

}  // namespace

std::span<const OpDefinition> tensor_op_definitions() { return kTensorOps; }

}  // namespace strider::ref
