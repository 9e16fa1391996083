// Pooling: MaxPool (with its optional Indices output), AveragePool, LpPool, GlobalAveragePool
// and GlobalMaxPool, over any number of spatial dims.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/shape.h"
#include "reference/op_support.h"
#include "reference/window.h"

namespace strider::ref {
namespace {

// The taps of one output window: spatial offsets (row-major and column-major) of those
// inside the input, and how many taps lie inside the padded input (for count_include_pad).
struct PoolWindow {
  std::vector<int64_t> row_major, column_major;
  int64_t inside_padded = 0;
};

// The taps k along one axis whose coordinate lies in [low, high): k in [first, end).
std::pair<int64_t, int64_t> taps_between(const WindowGeometry& g, size_t axis, int64_t o, int64_t low, int64_t high) {
  int64_t start = g.input_coordinate(axis, o, 0), step = g.dilations[axis];
  int64_t first = start >= low ? 0 : (low - start + step - 1) / step;
  int64_t end = start >= high ? 0 : std::min(g.kernel[axis], (high - 1 - start) / step + 1);
  return {first, std::max(first, end)};
}

// Only taps inside the input are visited, so a declared kernel far larger than the input
// (2^32 with SAME padding) costs what the input holds, not what the kernel says.
PoolWindow pool_window(const WindowGeometry& g, const std::vector<int64_t>& out_index) {
  PoolWindow w;
  Strides rows = contiguous_strides(g.input);
  Strides columns(g.input.size(), 1);
  for (size_t axis = 1; axis < g.input.size(); ++axis)
    columns[axis] = columns[axis - 1] * g.input[axis - 1];
  std::vector<int64_t> first(g.input.size()), count(g.input.size());
  w.inside_padded = 1;
  for (size_t axis = 0; axis < g.input.size(); ++axis) {
    auto [lo, hi] = taps_between(g, axis, out_index[axis], 0, g.input[axis]);
    first[axis] = lo;
    count[axis] = hi - lo;
    auto [plo, phi] = taps_between(g, axis, out_index[axis], -g.pad_begin[axis], g.input[axis] + g.pad_end[axis]);
    w.inside_padded *= phi - plo;
  }
  for_each_index(count, [&](int64_t, const std::vector<int64_t>& t) {
    int64_t row = 0, column = 0;
    for (size_t axis = 0; axis < t.size(); ++axis) {
      int64_t c = g.input_coordinate(axis, out_index[axis], first[axis] + t[axis]);
      row += c * rows[axis];
      column += c * columns[axis];
    }
    w.row_major.push_back(row);
    w.column_major.push_back(column);
  });
  return w;
}

struct PoolSetup {
  WindowGeometry geometry;
  int64_t planes = 0;      // N * C
  int64_t plane_size = 0;  // input elements per plane
  Shape out_shape;
};

Result<PoolSetup> pool_setup(const OpContext& ctx, const RefTensor& x, int dilations_since) {
  if (x.rank() < 3)
    return invalid_argument(
        fmt::format("X {} needs rank >= 3 (N, C, spatial...)", shape_to_string(x.shape)));
  WindowOptions options;
  if (ctx.opset() >= 10) {
    STRIDER_ASSIGN_OR_RETURN(options.ceil_mode, ctx.attributes().get_int("ceil_mode", 0));
  }
  options.drop_windows_starting_in_right_padding = true;
  options.dilations_allowed = ctx.opset() >= dilations_since;
  PoolSetup s;
  Shape spatial(x.shape.begin() + 2, x.shape.end());
  STRIDER_ASSIGN_OR_RETURN(s.geometry, window_geometry(ctx.attributes(), spatial, options));
  s.planes = x.shape[0] * x.shape[1];
  s.plane_size = num_elements(spatial);
  s.out_shape = {x.shape[0], x.shape[1]};
  s.out_shape.insert(s.out_shape.end(), s.geometry.output.begin(), s.geometry.output.end());
  STRIDER_RETURN_IF_ERROR(checked_element_count(s.out_shape, "output shape"));
  return s;
}

// The tap holding a window's maximum (the first of equal maxima), skipping NaN; a window of
// NaN only gives its first tap, an empty window (entirely in padding) -1.
int64_t argmax_tap(const RefTensor& x, int64_t base, const std::vector<int64_t>& offsets) {
  int64_t best = -1;
  for (size_t t = 0; t < offsets.size(); ++t) {
    size_t i = size_t(base + offsets[t]);
    if (x.is_floating()) {
      if (std::isnan(x.floats[i])) continue;
      if (best < 0 || x.floats[i] > x.floats[size_t(base + offsets[size_t(best)])])
        best = int64_t(t);
    } else if (best < 0 || x.ints[i] > x.ints[size_t(base + offsets[size_t(best)])]) {
      best = int64_t(t);
    }
  }
  return best < 0 && !offsets.empty() ? 0 : best;
}

// Y is each window's maximum; Indices its flat index in X, with the spatial part row-major
// (storage_order 0) or column-major (1). An empty window gives the lowest value and -1.
Result<OpOutputs> max_pool_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* x, ctx.input(0, "X"));
  if (x->dtype == DType::kBool)
    return invalid_model("input 0 (X) is bool, expected a numeric type");
  STRIDER_ASSIGN_OR_RETURN(PoolSetup s, pool_setup(ctx, *x, 10));
  int64_t storage_order = 0;
  if (ctx.opset() >= 8) {
    STRIDER_ASSIGN_OR_RETURN(storage_order, ctx.attributes().get_int("storage_order", 0));
  }
  RefTensor y = RefTensor::zeros(x->dtype, s.out_shape);
  RefTensor indices = RefTensor::zeros(DType::kI64, s.out_shape);
  // No planes (N or C is 0): no window to visit, however many positions the other dims give.
  if (s.planes == 0) return OpOutputs{std::move(y), std::move(indices)};
  int64_t out_size = num_elements(s.geometry.output);
  for_each_index(s.geometry.output, [&](int64_t position, const std::vector<int64_t>& out_index) {
    PoolWindow w = pool_window(s.geometry, out_index);
    for (int64_t plane = 0; plane < s.planes; ++plane) {
      int64_t base = plane * s.plane_size;
      int64_t tap = argmax_tap(*x, base, w.row_major);
      size_t o = size_t(plane * out_size + position);
      if (tap < 0) {
        if (y.is_floating()) y.floats[o] = -std::numeric_limits<double>::infinity();
        if (!y.is_floating()) y.ints[o] = integer_lowest(y.dtype);
        indices.ints[o] = -1;
        continue;
      }
      convert_element(*x, base + w.row_major[size_t(tap)], y, int64_t(o));
      indices.ints[o] = base + (storage_order == 0 ? w.row_major : w.column_major)[size_t(tap)];
    }
  });
  return OpOutputs{std::move(y), std::move(indices)};
}

// The mean of a window: over the taps inside the input (count_include_pad=0) or inside the
// padded input (count_include_pad=1, padding counting as zeros).
Result<OpOutputs> average_pool_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* x, ctx.input(0, "X"));
  STRIDER_RETURN_IF_ERROR(require_floating(*x, "input 0 (X)"));
  STRIDER_ASSIGN_OR_RETURN(PoolSetup s, pool_setup(ctx, *x, 19));
  STRIDER_ASSIGN_OR_RETURN(int64_t count_include_pad,
                           ctx.attributes().get_int("count_include_pad", 0));
  RefTensor y = RefTensor::zeros(x->dtype, s.out_shape);
  if (s.planes == 0) return OpOutputs{std::move(y)};  // as in MaxPool
  int64_t out_size = num_elements(s.geometry.output);
  for_each_index(s.geometry.output, [&](int64_t position, const std::vector<int64_t>& out_index) {
    PoolWindow w = pool_window(s.geometry, out_index);
    double divisor = double(count_include_pad != 0 ? w.inside_padded : int64_t(w.row_major.size()));
    for (int64_t plane = 0; plane < s.planes; ++plane) {
      double sum = 0;
      for (int64_t offset : w.row_major) sum += x->floats[size_t(plane * s.plane_size + offset)];
      y.floats[size_t(plane * out_size + position)] = sum / divisor;
    }
  });
  return OpOutputs{std::move(y)};
}

// LpPool: (sum over the window's taps inside the input of |x|^p)^(1/p); padding adds 0.
Result<OpOutputs> lp_pool_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* x, ctx.input(0, "X"));
  STRIDER_RETURN_IF_ERROR(require_floating(*x, "input 0 (X)"));
  STRIDER_ASSIGN_OR_RETURN(PoolSetup s, pool_setup(ctx, *x, 18));
  STRIDER_ASSIGN_OR_RETURN(int64_t p, ctx.attributes().get_int("p", 2));
  if (p < 1) return invalid_model("p must be positive");
  RefTensor y = RefTensor::zeros(x->dtype, s.out_shape);
  if (s.planes == 0) return OpOutputs{std::move(y)};
  const int64_t out_size = num_elements(s.geometry.output);
  for_each_index(s.geometry.output, [&](int64_t position, const std::vector<int64_t>& out_index) {
    PoolWindow w = pool_window(s.geometry, out_index);
    for (int64_t plane = 0; plane < s.planes; ++plane) {
      double sum = 0;
      for (int64_t offset : w.row_major) sum += std::pow(std::fabs(x->floats[size_t(plane * s.plane_size + offset)]), double(p));
      y.floats[size_t(plane * out_size + position)] = std::pow(sum, 1.0 / double(p));
    }
  });
  return OpOutputs{std::move(y)};
}

Result<OpOutputs> global_pool(const OpContext& ctx, bool average) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* x, ctx.input(0, "X"));
  STRIDER_RETURN_IF_ERROR(require_floating(*x, "input 0 (X)"));
  if (x->rank() < 2)
    return invalid_argument(
        fmt::format("X {} needs rank >= 2 (N, C, spatial...)", shape_to_string(x->shape)));
  Shape out_shape = x->shape;
  for (size_t d = 2; d < out_shape.size(); ++d) out_shape[d] = 1;
  int64_t planes = x->shape[0] * x->shape[1];
  int64_t size = planes == 0 ? 0 : x->num_elements() / planes;
  RefTensor y = RefTensor::zeros(x->dtype, out_shape);
  for (int64_t plane = 0; plane < planes; ++plane) {
    double acc = average ? 0.0 : -std::numeric_limits<double>::infinity();
    for (int64_t i = 0; i < size; ++i) {
      double v = x->floats[size_t(plane * size + i)];
      acc = average ? acc + v : (std::isnan(v) || v > acc ? v : acc);
    }
    y.floats[size_t(plane)] = average ? acc / double(size) : acc;
  }
  return OpOutputs{std::move(y)};
}

Result<OpOutputs> global_average_pool_op(const OpContext& ctx) { return global_pool(ctx, true); }
Result<OpOutputs> global_max_pool_op(const OpContext& ctx) { return global_pool(ctx, false); }

// MaxUnpool: zeros of the output shape, X's values at the flat positions I names.
Result<OpOutputs> max_unpool_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* x, ctx.input(0, "X"));
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* indices, ctx.input(1, "I"));
  if (x->rank() < 3 || indices->shape != x->shape || indices->is_floating())
    return invalid_model(fmt::format("X {} and I {} must be [N, C, ...] of one shape, I integers", describe(*x), describe(*indices)));
  const size_t dims = size_t(x->rank()) - 2;
  Shape unpooled{x->shape[0], x->shape[1]};
  STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> kernel, ctx.attributes().require_ints("kernel_shape"));
  STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> strides, ctx.attributes().get_ints("strides", std::vector<int64_t>(dims, 1)));
  STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> pads, ctx.attributes().get_ints("pads", std::vector<int64_t>(2 * dims, 0)));
  if (kernel.size() != dims || strides.size() != dims || pads.size() != 2 * dims) return invalid_model("kernel_shape, strides or pads of the wrong length");
  for (size_t d = 0; d < dims; ++d) unpooled.push_back((x->shape[2 + d] - 1) * strides[d] - pads[d] - pads[dims + d] + kernel[d]);
  // With output_shape the unpooled tensor sits at the start of each dim of a larger one.
  const Shape out = ctx.optional_input(2) ? Shape(ctx.optional_input(2)->ints) : unpooled;
  if (out.size() != unpooled.size()) return invalid_model("output_shape has the wrong rank");
  for (size_t d = 0; d < out.size(); ++d)
    if (out[d] < unpooled[d]) return invalid_model("output_shape is smaller than the unpooled shape");
  STRIDER_ASSIGN_OR_RETURN(int64_t count, checked_element_count(unpooled, "the unpooled output"));
  STRIDER_RETURN_IF_ERROR(checked_element_count(out, "the output").status());
  RefTensor y = RefTensor::zeros(x->dtype, out);
  for (int64_t i = 0; i < x->num_elements(); ++i) {
    const int64_t at = indices->ints[size_t(i)];
    if (at < 0 || at >= count) return invalid_argument(fmt::format("index {} is outside the output's {} elements", at, count));
    int64_t rest = at, target = 0, scale = 1;  // the unpooled position, placed in `out`
    for (size_t d = out.size(); d-- > 0;) {
      target += (rest % unpooled[d]) * scale;
      rest /= unpooled[d];
      scale *= out[d];
    }
    if (y.is_floating()) y.floats[size_t(target)] = x->floats[size_t(i)];
    else y.ints[size_t(target)] = x->ints[size_t(i)];
  }
  return OpOutputs{std::move(y)};
}

constexpr OpDefinition kPoolOps[] = {
    {"MaxUnpool", 9, 27, max_unpool_op},
    {"MaxPool", 7, 27, max_pool_op},
    {"AveragePool", 7, 27, average_pool_op},
    {"LpPool", 2, 27, lp_pool_op},
    {"GlobalAveragePool", 7, 27, global_average_pool_op},
    {"GlobalMaxPool", 7, 27, global_max_pool_op},
};

}  // namespace

std::span<const OpDefinition> pool_op_definitions() { return kPoolOps; }

}  // namespace strider::ref
