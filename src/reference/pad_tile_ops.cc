// Pad (constant, reflect, edge, wrap; pads, value and axes as attributes or inputs),
// Tile, GatherElements, Trilu, ArgMax, ArgMin and CumSum in float64, from the ONNX operator definitions (numpy.pad and numpy.tile).
// Independent of ops/index_map.h, which the devices share.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "reference/op_support.h"

namespace strider::ref {
namespace {

// The input index numpy.pad reads for output index o of an axis of size n padded by
// `before` in `mode`, or -1 for the constant.
int64_t padded_source(const std::string& mode, int64_t o, int64_t before, int64_t n) {
  int64_t i = o - before;
  if (i >= 0 && i < n) return i;
  if (mode == "constant" || n == 0) return -1;
  if (mode == "edge") return i < 0 ? 0 : n - 1;
  if (mode == "wrap") return ((i % n) + n) % n;
  // reflect: mirror at the edges (the edge element is not repeated), again and again.
  if (n == 1) return 0;
  while (i < 0 || i >= n) i = i < 0 ? -i : 2 * (n - 1) - i;
  return i;
}

RefTensor gather_by_axes(const RefTensor& x, const Shape& out_shape, const std::vector<std::vector<int64_t>>& sources,
                         double value) {
  RefTensor y = RefTensor::zeros(x.dtype, out_shape);
  std::vector<int64_t> in_strides(x.shape.size(), 1);
  for (size_t d = x.shape.size(); d-- > 1;) in_strides[d - 1] = in_strides[d] * x.shape[d];
  for_each_index(out_shape, [&](int64_t flat, const std::vector<int64_t>& index) {
    int64_t source = 0;
    for (size_t d = 0; d < index.size(); ++d) {
      int64_t s = sources[d][size_t(index[d])];
      if (s < 0) {
        source = -1;
        break;
      }
      source += s * in_strides[d];
    }
    if (y.is_floating()) y.floats[size_t(flat)] = source < 0 ? value : x.floats[size_t(source)];
    else y.ints[size_t(flat)] = source < 0 ? std::clamp(truncate_to_int(value), integer_lowest(y.dtype), integer_highest(y.dtype)) : x.ints[size_t(source)];
  });
  return y;
}

Result<OpOutputs> pad_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* x, ctx.input(0, "data"));
  STRIDER_ASSIGN_OR_RETURN(std::string mode, ctx.attributes().get_string("mode", "constant"));
  if (mode != "constant" && mode != "reflect" && mode != "edge" && mode != "wrap")
    return invalid_model("mode must be constant, reflect, edge or wrap");
  std::vector<int64_t> pads;
  double value = 0;
  if (ctx.opset() < 11) {
    STRIDER_ASSIGN_OR_RETURN(pads, ctx.attributes().require_ints("pads"));
    STRIDER_ASSIGN_OR_RETURN(float v, ctx.attributes().get_float("value", 0.0f));
    value = v;
  } else {
    STRIDER_ASSIGN_OR_RETURN(const RefTensor* p, ctx.input(1, "pads"));
    STRIDER_ASSIGN_OR_RETURN(pads, read_ints(*p, "input 1 (pads)"));
    if (const RefTensor* v = ctx.optional_input(2)) {
      STRIDER_ASSIGN_OR_RETURN(value, read_scalar_double(*v, "input 2 (constant_value)"));
    }
  }
  const int64_t rank = x->rank();
  std::vector<int64_t> axes;
  if (const RefTensor* a = ctx.opset() >= 18 ? ctx.optional_input(3) : nullptr) {
    STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> given, read_ints(*a, "input 3 (axes)"));
    STRIDER_ASSIGN_OR_RETURN(axes, normalized_axes(given, rank, "input 3 (axes)"));
  } else {
    for (int64_t d = 0; d < rank; ++d) axes.push_back(d);
  }
  if (pads.size() != 2 * axes.size()) return invalid_model("pads must have two values per axis");
  std::vector<int64_t> before(size_t(rank), 0), after(size_t(rank), 0);
  for (size_t k = 0; k < axes.size(); ++k) {
    before[size_t(axes[k])] = pads[k];
    after[size_t(axes[k])] = pads[k + axes.size()];
  }
  Shape out_shape;
  std::vector<std::vector<int64_t>> sources(static_cast<size_t>(rank));
  for (size_t d = 0; d < size_t(rank); ++d) {
    int64_t size = x->shape[d] + before[d] + after[d];
    if (size < 0) return invalid_model("pads crop more than the axis has");
    out_shape.push_back(size);
    for (int64_t o = 0; o < size; ++o) sources[d].push_back(padded_source(mode, o, before[d], x->shape[d]));
  }
  STRIDER_RETURN_IF_ERROR(checked_element_count(out_shape, "output").status());
  return OpOutputs{gather_by_axes(*x, out_shape, sources, value)};
}

Result<OpOutputs> tile_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* x, ctx.input(0, "input"));
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* r, ctx.input(1, "repeats"));
  STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> repeats, read_ints(*r, "input 1 (repeats)"));
  if (int64_t(repeats.size()) != x->rank()) return invalid_model("repeats must have one value per axis");
  Shape out_shape;
  std::vector<std::vector<int64_t>> sources(repeats.size());
  for (size_t d = 0; d < repeats.size(); ++d) {
    if (repeats[d] < 0) return invalid_model("repeats must not be negative");
    out_shape.push_back(x->shape[d] * repeats[d]);
  }
  STRIDER_RETURN_IF_ERROR(checked_element_count(out_shape, "output").status());
  for (size_t d = 0; d < repeats.size(); ++d)
    for (int64_t o = 0; o < out_shape[d]; ++o) sources[d].push_back(o % x->shape[d]);
  return OpOutputs{gather_by_axes(*x, out_shape, sources, 0)};
}

// GatherElements: out[p] = data[p with its axis coordinate indices[p]].
Result<OpOutputs> gather_elements_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* data, ctx.input(0, "data"));
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* indices, ctx.input(1, "indices"));
  STRIDER_ASSIGN_OR_RETURN(int64_t axis_attr, ctx.attributes().get_int("axis", 0));
  STRIDER_ASSIGN_OR_RETURN(int64_t axis, normalized_axis(axis_attr, data->rank(), "attribute 'axis'"));
  STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> picks, read_ints(*indices, "input 1 (indices)"));
  if (indices->rank() != data->rank()) return invalid_model("indices and data must have one rank");
  std::vector<int64_t> strides(data->shape.size(), 1);
  for (size_t d = data->shape.size(); d-- > 1;) strides[d - 1] = strides[d] * data->shape[d];
  RefTensor out = RefTensor::zeros(data->dtype, indices->shape);
  const int64_t dim = data->shape[size_t(axis)];
  Status failure;
  for_each_index(indices->shape, [&](int64_t flat, const std::vector<int64_t>& index) {
    int64_t k = picks[size_t(flat)];
    if (k < -dim || k >= dim) {
      failure = out_of_range(fmt::format("index {} out of range [{}, {})", k, -dim, dim));
      return;
    }
    int64_t source = 0;
    for (size_t d = 0; d < index.size(); ++d) {
      if (int64_t(d) != axis && index[d] >= data->shape[d]) failure = invalid_model("indices do not fit data");
      source += (int64_t(d) == axis ? (k < 0 ? k + dim : k) : index[d]) * strides[d];
    }
    if (!failure.is_ok()) return;
    if (out.is_floating()) out.floats[size_t(flat)] = data->floats[size_t(source)];
    else out.ints[size_t(flat)] = data->ints[size_t(source)];
  });
  STRIDER_RETURN_IF_ERROR(failure);
  return OpOutputs{std::move(out)};
}

// Trilu: the upper (j - i >= k) or lower (j - i <= k) triangle of each matrix of the last
// two dims; the rest 0.
Result<OpOutputs> trilu_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* x, ctx.input(0, "input"));
  STRIDER_ASSIGN_OR_RETURN(int64_t upper, ctx.attributes().get_int("upper", 1));
  int64_t k = 0;
  if (const RefTensor* given = ctx.optional_input(1)) {
    STRIDER_ASSIGN_OR_RETURN(k, read_scalar_int(*given, "input 1 (k)"));
  }
  if (x->rank() < 2) return invalid_model("Trilu needs rank 2 or more");
  RefTensor y = *x;
  const int64_t rows = x->shape[x->shape.size() - 2], cols = x->shape.back();
  for (int64_t e = 0; e < x->num_elements(); ++e) {
    const int64_t i = (e / cols) % rows, j = e % cols;
    const bool keep = upper ? j - i >= k : j - i <= k;
    if (keep) continue;
    if (y.is_floating()) y.floats[size_t(e)] = 0;
    else y.ints[size_t(e)] = 0;
  }
  return OpOutputs{std::move(y)};
}

// ArgMax / ArgMin as numpy computes them (a NaN is the extreme; select_last_index takes the
// last of equal extremes), int64 out.
Result<OpOutputs> arg_reduce(const OpContext& ctx, bool max) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* x, ctx.input(0, "data"));
  STRIDER_ASSIGN_OR_RETURN(int64_t axis_attr, ctx.attributes().get_int("axis", 0));
  STRIDER_ASSIGN_OR_RETURN(int64_t keepdims, ctx.attributes().get_int("keepdims", 1));
  STRIDER_ASSIGN_OR_RETURN(int64_t last, ctx.attributes().get_int("select_last_index", 0));
  STRIDER_ASSIGN_OR_RETURN(int64_t axis, normalized_axis(axis_attr, x->rank(), "attribute 'axis'"));
  const int64_t n = x->shape[size_t(axis)];
  if (n == 0) return invalid_model("ArgMax/ArgMin over an empty axis");
  int64_t inner = 1;
  for (size_t d = size_t(axis) + 1; d < x->shape.size(); ++d) inner *= x->shape[d];
  Shape out_shape = x->shape;
  if (keepdims) out_shape[size_t(axis)] = 1;
  else out_shape.erase(out_shape.begin() + axis);
  RefTensor y = RefTensor::zeros(DType::kI64, out_shape);
  for (int64_t o = 0; o < y.num_elements(); ++o) {
    const int64_t base = (o / inner) * n * inner + o % inner;
    auto value = [&](int64_t j) { return x->element_as_double(base + j * inner); };
    int64_t at = 0;
    for (int64_t j = 1; j < n; ++j) {
      const double v = value(j), best = value(at);
      bool takes;
      if (std::isnan(best)) takes = last && std::isnan(v);
      else if (std::isnan(v)) takes = true;
      else takes = max ? (last ? v >= best : v > best) : (last ? v <= best : v < best);
      if (takes) at = j;
    }
    y.ints[size_t(o)] = at;
  }
  return OpOutputs{std::move(y)};
}

Result<OpOutputs> arg_max_op(const OpContext& ctx) { return arg_reduce(ctx, true); }
Result<OpOutputs> arg_min_op(const OpContext& ctx) { return arg_reduce(ctx, false); }

// CumSum (CumProd): running sums (products) along `axis` (input 1), from the end with
// `reverse`, each without its own element with `exclusive`; integers wrap to their type.
Result<OpOutputs> cumulative(const OpContext& ctx, bool product) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* x, ctx.input(0, "x"));
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* a, ctx.input(1, "axis"));
  STRIDER_ASSIGN_OR_RETURN(int64_t axis_value, read_scalar_int(*a, "input 1 (axis)"));
  STRIDER_ASSIGN_OR_RETURN(int64_t axis, normalized_axis(axis_value, x->rank(), "input 1 (axis)"));
  STRIDER_ASSIGN_OR_RETURN(int64_t exclusive, ctx.attributes().get_int("exclusive", 0));
  STRIDER_ASSIGN_OR_RETURN(int64_t reverse, ctx.attributes().get_int("reverse", 0));
  RefTensor y = *x;
  const int64_t n = x->shape[size_t(axis)];
  int64_t inner = 1;
  for (size_t d = size_t(axis) + 1; d < x->shape.size(); ++d) inner *= x->shape[d];
  const int64_t rows = n ? x->num_elements() / n : 0;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t base = (r / inner) * n * inner + r % inner;
    double sum = product ? 1 : 0;
    int64_t isum = product ? 1 : 0;
    for (int64_t t = 0; t < n; ++t) {
      const size_t at = size_t(base + (reverse ? n - 1 - t : t) * inner);
      if (y.is_floating()) {
        const double v = x->floats[at], next = product ? sum * v : sum + v;
        y.floats[at] = exclusive ? sum : next;
        sum = next;
      } else {
        const int64_t v = x->ints[at], next = product ? wrapping_mul(isum, v) : wrapping_add(isum, v);
        y.ints[at] = wrap_to_dtype(exclusive ? isum : next, y.dtype);
        isum = next;
      }
    }
  }
  return OpOutputs{std::move(y)};
}

Result<OpOutputs> cumsum_op(const OpContext& ctx) { return cumulative(ctx, false); }
Result<OpOutputs> cumprod_op(const OpContext& ctx) { return cumulative(ctx, true); }

// TopK: per row along the axis, the k largest (or smallest) elements, a NaN the largest,
// equal values by lower index, sorted, with their indices.
Result<OpOutputs> topk_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* x, ctx.input(0, "X"));
  int64_t k = 0;
  if (ctx.opset() < 10) {
    STRIDER_ASSIGN_OR_RETURN(k, ctx.attributes().require_int("k"));
  } else {
    STRIDER_ASSIGN_OR_RETURN(const RefTensor* kt, ctx.input(1, "K"));
    if (kt->num_elements() != 1) return invalid_model("K must have one element");
    k = kt->element_as_int(0);
  }
  STRIDER_ASSIGN_OR_RETURN(int64_t axis_attr, ctx.attributes().get_int("axis", -1));
  STRIDER_ASSIGN_OR_RETURN(int64_t axis, normalized_axis(axis_attr, x->rank(), "attribute 'axis'"));
  STRIDER_ASSIGN_OR_RETURN(int64_t largest, ctx.attributes().get_int("largest", 1));
  const int64_t n = x->shape[size_t(axis)], inner = product(x->shape, size_t(axis) + 1, x->shape.size());
  if (k < 0 || k > n) return invalid_model(fmt::format("K {} is not in [0, {}]", k, n));
  Shape shape = x->shape;
  shape[size_t(axis)] = k;
  RefTensor values = RefTensor::zeros(x->dtype, shape), indices = RefTensor::zeros(DType::kI64, shape);
  const int64_t outer = n == 0 ? 0 : x->num_elements() / (n * inner);
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      auto at = [&](int64_t j) { return x->element_as_double((o * n + j) * inner + i); };
      for (int64_t j = 0; j < n; ++j) order[size_t(j)] = j;
      std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
        const double va = at(a), vb = at(b);
        if (std::isnan(va) || std::isnan(vb)) return !std::isnan(vb) ? largest != 0 : (std::isnan(va) ? false : largest == 0);
        return largest ? va > vb : va < vb;
      });
      for (int64_t j = 0; j < k; ++j) {
        const size_t to = size_t((o * k + j) * inner + i), from = size_t((o * n + order[size_t(j)]) * inner + i);
        if (values.is_floating()) values.floats[to] = x->floats[from];
        else values.ints[to] = x->ints[from];
        indices.ints[to] = order[size_t(j)];
      }
    }
  return OpOutputs{std::move(values), std::move(indices)};
}

constexpr OpDefinition kPadTileOps[] = {
    {"TopK", 1, 27, topk_op},
    {"CumSum", 11, 27, cumsum_op},
    {"CumProd", 26, 27, cumprod_op},
    {"ArgMax", 7, 27, arg_max_op},
    {"ArgMin", 7, 27, arg_min_op},
    {"Trilu", 14, 27, trilu_op},
    {"GatherElements", 11, 27, gather_elements_op},
    {"Pad", 2, 27, pad_op},
    {"Tile", 6, 27, tile_op},
};

}  // namespace

std::span<const OpDefinition> pad_tile_op_definitions() { return kPadTileOps; }

}  // namespace strider::ref
