// Resize (opsets 10, 11, 13, 18, 19) and its deprecated ancestor Upsample (7 to 10).
//
// Interpolation is separable: for each axis and output coordinate, the coordinate
// transformation gives x_original, and the mode turns it into input taps and weights:
// nearest one tap, linear and cubic the taps of their kernel (widened by 1/scale when
// antialiasing a downscale). Tap indices are clamped to the input (edge padding);
// exclude_outside drops taps outside the input and renormalizes. An output element is the
// weighted sum over the product of its per-axis taps.
//
// Before opset 11 (Resize-10 and Upsample) there is no coordinate_transformation_mode: the
// transform is asymmetric and nearest takes floor(x) when upscaling, ceil(x) when
// downscaling (the convention of those versions' test data and of ONNX Runtime).
#include <fmt/format.h>

#include <cmath>

#include "base/shape.h"
#include "reference/op_support.h"
#include "reference/resize.h"

namespace strider::ref {
namespace {

bool one_of(const std::string& value, std::initializer_list<const char*> allowed) {
  for (const char* a : allowed)
    if (value == a) return true;
  return false;
}

Result<ResizeConfig> resize_config(const OpContext& ctx, bool is_upsample) {
  const AttributeMap& a = ctx.attributes();
  ResizeConfig c;
  STRIDER_ASSIGN_OR_RETURN(c.mode, a.get_string("mode", "nearest"));
  if (!one_of(c.mode, {"nearest", "linear", "cubic"}) || (c.mode == "cubic" && ctx.opset() < 11))
    return invalid_model(fmt::format("attribute 'mode' is '{}'", c.mode));
  if (is_upsample || ctx.opset() < 11) {
    c.legacy_nearest = true;
    return c;
  }
  STRIDER_ASSIGN_OR_RETURN(c.coordinate_mode,
                           a.get_string("coordinate_transformation_mode", "half_pixel"));
  STRIDER_ASSIGN_OR_RETURN(c.nearest_mode, a.get_string("nearest_mode", "round_prefer_floor"));
  STRIDER_ASSIGN_OR_RETURN(c.cubic_a, a.get_float("cubic_coeff_a", -0.75f));
  STRIDER_ASSIGN_OR_RETURN(int64_t exclude, a.get_int("exclude_outside", 0));
  STRIDER_ASSIGN_OR_RETURN(c.extrapolation_value, a.get_float("extrapolation_value", 0.0f));
  c.exclude_outside = exclude != 0;
  if (ctx.opset() >= 18) {
    STRIDER_ASSIGN_OR_RETURN(int64_t antialias, a.get_int("antialias", 0));
    c.antialias = antialias != 0;
    STRIDER_ASSIGN_OR_RETURN(c.aspect_policy, a.get_string("keep_aspect_ratio_policy", "stretch"));
  }
  bool known = one_of(c.coordinate_mode, {"half_pixel", "pytorch_half_pixel", "align_corners",
                                          "asymmetric", "tf_crop_and_resize"}) ||
               (c.coordinate_mode == "tf_half_pixel_for_nn" && ctx.opset() == 11) ||
               (c.coordinate_mode == "half_pixel_symmetric" && ctx.opset() >= 19);
  if (!known)
    return invalid_model(
        fmt::format("attribute 'coordinate_transformation_mode' is '{}' at opset {}",
                    c.coordinate_mode, ctx.opset()));
  if (!one_of(c.nearest_mode, {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"}))
    return invalid_model(fmt::format("attribute 'nearest_mode' is '{}'", c.nearest_mode));
  if (!one_of(c.aspect_policy, {"stretch", "not_larger", "not_smaller"}))
    return invalid_model(
        fmt::format("attribute 'keep_aspect_ratio_policy' is '{}'", c.aspect_policy));
  return c;
}

// The scales, sizes, roi and axes arguments, by version; an empty tensor counts as absent.
struct ResizeArguments {
  std::optional<std::vector<double>> scales;
  std::optional<std::vector<int64_t>> sizes;
  std::vector<double> roi;
  std::vector<int64_t> axes;  // the axes that scales / sizes / roi describe
};

Result<ResizeArguments> resize_arguments(const OpContext& ctx, const RefTensor& x,
                                         bool is_upsample) {
  ResizeArguments args;
  if (is_upsample && ctx.opset() < 9) {
    STRIDER_ASSIGN_OR_RETURN(std::vector<float> scales, ctx.attributes().get_floats("scales", {}));
    args.scales = std::vector<double>(scales.begin(), scales.end());
  } else if (is_upsample || ctx.opset() < 11) {
    STRIDER_ASSIGN_OR_RETURN(const RefTensor* scales, ctx.input(1, "scales"));
    args.scales = read_doubles(*scales);
  } else {
    if (const RefTensor* roi = ctx.optional_input(1)) args.roi = read_doubles(*roi);
    if (const RefTensor* scales = ctx.optional_input(2); scales && scales->num_elements() > 0)
      args.scales = read_doubles(*scales);
    if (const RefTensor* sizes = ctx.optional_input(3); sizes && sizes->num_elements() > 0) {
      STRIDER_ASSIGN_OR_RETURN(args.sizes, read_ints(*sizes, "input 3 (sizes)"));
    }
  }
  if (args.scales.has_value() == args.sizes.has_value())
    return invalid_model("exactly one of scales and sizes must be given");
  for (size_t i = 0; i < size_t(x.rank()); ++i) args.axes.push_back(int64_t(i));
  if (ctx.opset() >= 18 && !is_upsample && ctx.attributes().has("axes")) {
    STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> axes, ctx.attributes().require_ints("axes"));
    STRIDER_ASSIGN_OR_RETURN(args.axes, normalized_axes(axes, x.rank(), "attribute 'axes'"));
  }
  size_t n = args.axes.size();
  size_t given = args.scales ? args.scales->size() : args.sizes->size();
  if (given != n)
    return invalid_model(
        fmt::format("{} has {} entries for {} axes", args.scales ? "scales" : "sizes", given, n));
  if (!args.roi.empty() && args.roi.size() != 2 * n)
    return invalid_model(fmt::format("roi has {} entries, expected {}", args.roi.size(), 2 * n));
  return args;
}

// Output sizes and transformation scales per axis (axes not listed keep scale 1).
Result<std::vector<ResizeAxis>> resize_axes(const ResizeConfig& c, const ResizeArguments& args,
                                            const Shape& in) {
  std::vector<ResizeAxis> axes(in.size());
  for (size_t d = 0; d < in.size(); ++d) axes[d] = {in[d], in[d], 1.0, 0.0, 1.0};
  double policy_scale = c.aspect_policy == "not_larger" ? INFINITY : 0;
  for (size_t i = 0; i < args.axes.size(); ++i) {
    ResizeAxis& axis = axes[size_t(args.axes[i])];
    if (!args.roi.empty()) {
      axis.roi_start = args.roi[i];
      axis.roi_end = args.roi[args.axes.size() + i];
    }
    if (args.scales) {
      axis.scale = (*args.scales)[i];
      if (!(axis.scale > 0))
        return invalid_argument(fmt::format("scales[{}] is {}, expected > 0", i, axis.scale));
      double extent =
          c.coordinate_mode == "tf_crop_and_resize" ? axis.roi_end - axis.roi_start : 1.0;
      double out = std::floor(double(axis.in) * extent * axis.scale);
      if (!(out >= 0 && out <= double(kMaxElements)))
        return invalid_argument(
            fmt::format("scales[{}] = {} gives an output dim of {}", i, axis.scale, out));
      axis.out = int64_t(out);
      continue;
    }
    int64_t size = (*args.sizes)[i];
    if (size < 0 || axis.in == 0)
      return invalid_argument(
          fmt::format("sizes[{}] is {} for an input dim of {}", i, size, axis.in));
    axis.out = size;
    axis.scale = double(size) / double(axis.in);
    policy_scale = c.aspect_policy == "not_larger" ? std::min(policy_scale, axis.scale)
                                                   : std::max(policy_scale, axis.scale);
  }
  if (args.sizes && c.aspect_policy != "stretch") {
    for (int64_t d : args.axes) {
      axes[size_t(d)].scale = policy_scale;
      double out = policy_scale * double(axes[size_t(d)].in) + 0.5;  // round half up
      if (!(out <= double(kMaxElements)))
        return invalid_argument(fmt::format("sizes give an output dim of {}", out));
      axes[size_t(d)].out = int64_t(out);
    }
  }
  return axes;
}

double weighted_sum(const std::vector<double>& values, const Strides& strides,
                    const std::vector<const CoordinateTaps*>& per_axis, size_t axis,
                    int64_t offset) {
  if (axis == per_axis.size()) return values[size_t(offset)];
  double sum = 0;
  for (const Tap& t : per_axis[axis]->taps)
    sum += t.weight *
           weighted_sum(values, strides, per_axis, axis + 1, offset + t.index * strides[axis]);
  return sum;
}

// Each output element is the weighted sum over the product of its per-axis taps, or the
// extrapolation value when a tf_crop_and_resize coordinate falls outside the input.
// Integer outputs truncate toward zero.
RefTensor interpolate(const RefTensor& x, const std::vector<ResizeAxis>& axes,
                      const ResizeConfig& c) {
  std::vector<std::vector<CoordinateTaps>> taps;
  Shape out_shape;
  for (const ResizeAxis& axis : axes) {
    taps.push_back(coordinate_taps(c, axis));
    out_shape.push_back(axis.out);
  }
  std::vector<double> values = read_doubles(x);
  Strides strides = contiguous_strides(x.shape);
  RefTensor y = RefTensor::zeros(x.dtype, out_shape);
  std::vector<const CoordinateTaps*> per_axis(axes.size());
  for_each_index(out_shape, [&](int64_t flat, const std::vector<int64_t>& index) {
    bool outside = false;
    for (size_t d = 0; d < axes.size(); ++d) {
      per_axis[d] = &taps[d][size_t(index[d])];
      outside = outside || per_axis[d]->outside;
    }
    double v = outside ? c.extrapolation_value : weighted_sum(values, strides, per_axis, 0, 0);
    if (y.is_floating()) {
      y.floats[size_t(flat)] = v;
    } else {
      y.ints[size_t(flat)] = wrap_to_dtype(truncate_to_int(v), y.dtype);
    }
  });
  return y;
}

Result<OpOutputs> resize_family(const OpContext& ctx, bool is_upsample) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* x, ctx.input(0, "X"));
  if (x->dtype == DType::kBool)
    return invalid_model("input 0 (X) is bool, expected a numeric type");
  STRIDER_ASSIGN_OR_RETURN(ResizeConfig config, resize_config(ctx, is_upsample));
  STRIDER_ASSIGN_OR_RETURN(ResizeArguments args, resize_arguments(ctx, *x, is_upsample));
  STRIDER_ASSIGN_OR_RETURN(std::vector<ResizeAxis> axes, resize_axes(config, args, x->shape));
  Shape out_shape;
  for (const ResizeAxis& axis : axes) out_shape.push_back(axis.out);
  STRIDER_RETURN_IF_ERROR(checked_element_count(out_shape, "output shape"));
  return OpOutputs{interpolate(*x, axes, config)};
}

Result<OpOutputs> resize_op(const OpContext& ctx) { return resize_family(ctx, false); }
Result<OpOutputs> upsample_op(const OpContext& ctx) { return resize_family(ctx, true); }

constexpr OpDefinition kResizeOps[] = {
    {"Resize", 10, 27, resize_op},
    {"Upsample", 7, 10, upsample_op},
};

}  // namespace

std::span<const OpDefinition> resize_op_definitions() { return kResizeOps; }

}  // namespace strider::ref
