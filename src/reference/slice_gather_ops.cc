// Slice, Gather and Expand: the indexing ops of the tensor family (registered in
// tensor_ops.cc).
#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "base/shape.h"
#include "reference/op_support.h"

namespace strider::ref {
namespace {

// One axis of a slice: output element i reads input index start + i * step.
struct SliceAxis {
  int64_t start = 0;
  int64_t step = 1;
  int64_t count = 0;
};

// The spec's clamping: negative starts/ends count from the end, then starts clamp to
// [0, dim] ([0, dim - 1] for a negative step) and ends to [0, dim] ([-1, dim - 1]).
SliceAxis clamp_slice(int64_t start, int64_t end, int64_t step, int64_t dim) {
  if (start < 0) start += dim;
  if (end < 0) end += dim;
  SliceAxis axis;
  axis.step = step;
  if (step > 0) {
    start = std::min(std::max<int64_t>(start, 0), dim);
    end = std::min(std::max<int64_t>(end, 0), dim);
    axis.count = end > start ? (end - start - 1) / step + 1 : 0;
  } else {
    start = std::min(std::max<int64_t>(start, 0), dim - 1);
    end = std::min(std::max<int64_t>(end, -1), dim - 1);
    uint64_t magnitude = uint64_t(0) - uint64_t(step);  // no overflow for INT64_MIN
    axis.count = start > end ? int64_t(uint64_t(start - end - 1) / magnitude + 1) : 0;
  }
  axis.start = start;
  return axis;
}

struct SliceArguments {
  std::vector<int64_t> starts, ends, axes, steps;
};

// Attributes starts/ends/axes before opset 10; inputs starts/ends/axes/steps from 10.
Result<SliceArguments> slice_arguments(const OpContext& ctx) {
  SliceArguments args;
  bool has_axes = false, has_steps = false;
  if (ctx.opset() < 10) {
    STRIDER_ASSIGN_OR_RETURN(args.starts, ctx.attributes().require_ints("starts"));
    STRIDER_ASSIGN_OR_RETURN(args.ends, ctx.attributes().require_ints("ends"));
    has_axes = ctx.attributes().has("axes");
    if (has_axes) {
      STRIDER_ASSIGN_OR_RETURN(args.axes, ctx.attributes().require_ints("axes"));
    }
  } else {
    STRIDER_ASSIGN_OR_RETURN(const RefTensor* starts, ctx.input(1, "starts"));
    STRIDER_ASSIGN_OR_RETURN(const RefTensor* ends, ctx.input(2, "ends"));
    STRIDER_ASSIGN_OR_RETURN(args.starts, read_ints(*starts, "input 1 (starts)"));
    STRIDER_ASSIGN_OR_RETURN(args.ends, read_ints(*ends, "input 2 (ends)"));
    has_axes = ctx.has_input(3);
    if (has_axes) {
      STRIDER_ASSIGN_OR_RETURN(args.axes, read_ints(*ctx.optional_input(3), "input 3 (axes)"));
    }
    has_steps = ctx.has_input(4);
    if (has_steps) {
      STRIDER_ASSIGN_OR_RETURN(args.steps, read_ints(*ctx.optional_input(4), "input 4 (steps)"));
    }
  }
  size_t n = args.starts.size();
  if (!has_axes)
    for (size_t i = 0; i < n; ++i) args.axes.push_back(int64_t(i));
  if (!has_steps) args.steps.assign(n, 1);
  if (args.ends.size() != n || args.axes.size() != n || args.steps.size() != n)
    return invalid_model(fmt::format("starts, ends, axes and steps have {}, {}, {} and {} entries",
                                     n, args.ends.size(), args.axes.size(), args.steps.size()));
  return args;
}

}  // namespace

Result<OpOutputs> slice_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* x, ctx.input(0, "data"));
  STRIDER_ASSIGN_OR_RETURN(SliceArguments args, slice_arguments(ctx));
  STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> axes,
                           normalized_axes(args.axes, x->rank(), "axes"));
  std::vector<SliceAxis> plan(x->shape.size());
  for (size_t d = 0; d < plan.size(); ++d) plan[d].count = x->shape[d];
  for (size_t i = 0; i < axes.size(); ++i) {
    if (args.steps[i] == 0) return invalid_argument(fmt::format("steps[{}] is 0", i));
    size_t d = size_t(axes[i]);
    plan[d] = clamp_slice(args.starts[i], args.ends[i], args.steps[i], x->shape[d]);
  }
  Shape out;
  for (const SliceAxis& axis : plan) out.push_back(axis.count);
  Strides in_strides = contiguous_strides(x->shape);
  std::vector<int64_t> source(size_t(num_elements(out)));
  for_each_index(out, [&](int64_t flat, const std::vector<int64_t>& index) {
    int64_t s = 0;
    for (size_t d = 0; d < index.size(); ++d)
      s += (plan[d].start + index[d] * plan[d].step) * in_strides[d];
    source[size_t(flat)] = s;
  });
  return OpOutputs{gather_elements(*x, std::move(out), source)};
}

// Gather: output = data[:axis] + indices.shape + data[axis + 1:]; negative indices count
// from the end of the axis.
Result<OpOutputs> gather_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* data, ctx.input(0, "data"));
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* indices, ctx.input(1, "indices"));
  STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> positions,
                           read_ints(*indices, "input 1 (indices)"));
  STRIDER_ASSIGN_OR_RETURN(int64_t axis_attr, ctx.attributes().get_int("axis", 0));
  STRIDER_ASSIGN_OR_RETURN(int64_t axis,
                           normalized_axis(axis_attr, data->rank(), "attribute 'axis'"));
  int64_t dim = data->shape[size_t(axis)];
  for (size_t i = 0; i < positions.size(); ++i) {
    int64_t p = positions[i] < 0 ? positions[i] + dim : positions[i];
    if (p < 0 || p >= dim)
      return invalid_argument(
          fmt::format("input 1 (indices) element {} is {}, out of range for axis {} of size {}", i,
                      positions[i], axis, dim));
    positions[i] = p;
  }
  Shape out(data->shape.begin(), data->shape.begin() + axis);
  out.insert(out.end(), indices->shape.begin(), indices->shape.end());
  out.insert(out.end(), data->shape.begin() + axis + 1, data->shape.end());
  int64_t outer = num_elements(std::span(data->shape).first(size_t(axis)));
  int64_t inner = num_elements(std::span(data->shape).subspan(size_t(axis) + 1));
  std::vector<int64_t> source;
  source.reserve(size_t(num_elements(out)));
  if (num_elements(out) == 0) outer = 0;  // no loop over an empty output's dims
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t p : positions)
      for (int64_t k = 0; k < inner; ++k) source.push_back((o * dim + p) * inner + k);
  return OpOutputs{gather_elements(*data, std::move(out), source)};
}

// Expand: bidirectional broadcast of the input with the requested shape.
Result<OpOutputs> expand_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* x, ctx.input(0, "input"));
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* shape, ctx.input(1, "shape"));
  STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> requested, read_ints(*shape, "input 1 (shape)"));
  STRIDER_RETURN_IF_ERROR(checked_element_count(requested, "input 1 (shape)"));
  STRIDER_ASSIGN_OR_RETURN(Shape out, broadcast_or_error(x->shape, requested));
  STRIDER_RETURN_IF_ERROR(checked_element_count(out, "output shape"));
  return OpOutputs{gather_elements(*x, out, broadcast_source_index(x->shape, out))};
}

}  // namespace strider::ref
