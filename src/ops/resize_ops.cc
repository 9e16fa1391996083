// Resize and Upsample: parameter resolution (all opsets) and the shape function.
#include <algorithm>
#include <cmath>

#include "ops/resize_params.h"

namespace strider {
namespace {

Status parse_modes(const NodeInputs& node, ResizeParams* p) {
  const AttributeMap& a = node.attributes();
  STRIDER_ASSIGN_OR_RETURN(std::string mode, a.get_string("mode", "nearest"));
  if (mode == "nearest") p->mode = ResizeMode::kNearest;
  else if (mode == "linear" || mode == "bilinear" || mode == "trilinear") p->mode = ResizeMode::kLinear;
  else if (mode == "cubic") p->mode = ResizeMode::kCubic;
  else return node.error("unknown mode '{}'", mode);
  // Upsample and Resize-10 behave as 'asymmetric' with floor for nearest.
  bool legacy = node.node().op_type == "Upsample" || node.opset() < 11;
  std::string default_coordinate = legacy ? "asymmetric" : "half_pixel";
  STRIDER_ASSIGN_OR_RETURN(std::string coord,
                           a.get_string("coordinate_transformation_mode", default_coordinate));
  static const std::pair<const char*, CoordinateMode> kCoordinates[] = {
      {"half_pixel", CoordinateMode::kHalfPixel},
      {"half_pixel_symmetric", CoordinateMode::kHalfPixelSymmetric},
      {"pytorch_half_pixel", CoordinateMode::kPytorchHalfPixel},
      {"align_corners", CoordinateMode::kAlignCorners},
      {"asymmetric", CoordinateMode::kAsymmetric},
      {"tf_crop_and_resize", CoordinateMode::kTfCropAndResize},
      {"tf_half_pixel_for_nn", CoordinateMode::kTfHalfPixelForNearest}};
  auto c = std::find_if(std::begin(kCoordinates), std::end(kCoordinates),
                        [&](const auto& e) { return coord == e.first; });
  if (c == std::end(kCoordinates)) return node.error("unknown coordinate_transformation_mode '{}'", coord);
  p->coordinate_mode = c->second;
  STRIDER_ASSIGN_OR_RETURN(std::string nearest,
                           a.get_string("nearest_mode", legacy ? "floor" : "round_prefer_floor"));
  if (nearest == "round_prefer_floor") p->nearest_mode = NearestMode::kRoundPreferFloor;
  else if (nearest == "round_prefer_ceil") p->nearest_mode = NearestMode::kRoundPreferCeil;
  else if (nearest == "floor") p->nearest_mode = NearestMode::kFloor;
  else if (nearest == "ceil") p->nearest_mode = NearestMode::kCeil;
  else return node.error("unknown nearest_mode '{}'", nearest);
  STRIDER_ASSIGN_OR_RETURN(float coeff, a.get_float("cubic_coeff_a", -0.75f));
  STRIDER_ASSIGN_OR_RETURN(int64_t exclude, a.get_int("exclude_outside", 0));
  STRIDER_ASSIGN_OR_RETURN(float extrapolation, a.get_float("extrapolation_value", 0.0f));
  STRIDER_ASSIGN_OR_RETURN(int64_t antialias, a.get_int("antialias", 0));
  p->cubic_coeff_a = coeff;
  p->exclude_outside = exclude != 0;
  p->extrapolation_value = extrapolation;
  p->antialias = antialias != 0;
  return Status::ok();
}

// The input index of scales/sizes/roi by op version (Upsample-9 and Resize-10: X, scales).
struct ResizeInputs {
  int roi = -1, scales = -1, sizes = -1;
};
ResizeInputs input_layout(const NodeInputs& node) {
  if (node.node().op_type == "Upsample") return {-1, node.opset() >= 9 ? 1 : -1, -1};
  if (node.opset() < 11) return {-1, 1, -1};
  return {1, 2, 3};
}

bool present(const NodeInputs& node, int index) {
  return index >= 0 && node.has_input(size_t(index)) &&
         num_elements(node.input_shape(size_t(index))) > 0;
}

// Turns per-axis `values` into per-dim values, with `fill` on dims not in `axes`.
Result<std::vector<double>> spread_over_axes(const NodeInputs& node, const std::vector<double>& values,
                                             const std::vector<int64_t>& axes, int64_t rank,
                                             double fill) {
  if (values.size() != axes.size())
    return node.error("{} values for {} axes", values.size(), axes.size());
  std::vector<double> per_dim(size_t(rank), fill);
  for (size_t i = 0; i < axes.size(); ++i) per_dim[size_t(axes[i])] = values[i];
  return per_dim;
}

Status resolve_sizes(const NodeInputs& node, const std::vector<int64_t>& sizes,
                     const std::vector<int64_t>& axes, ResizeParams* p) {
  const Shape& in = node.input_shape(0);
  if (sizes.size() != axes.size()) return node.error("{} sizes for {} axes", sizes.size(), axes.size());
  STRIDER_ASSIGN_OR_RETURN(std::string policy,
                           node.attributes().get_string("keep_aspect_ratio_policy", "stretch"));
  if (policy != "stretch" && policy != "not_larger" && policy != "not_smaller")
    return node.error("unknown keep_aspect_ratio_policy '{}'", policy);
  for (size_t i = 0; i < axes.size(); ++i) {
    if (sizes[i] < 0) return node.error("sizes[{}] is {}", i, sizes[i]);
    if (in[size_t(axes[i])] == 0 && sizes[i] != 0)
      return node.error("sizes[{}] is {} but input dim {} is empty", i, sizes[i], axes[i]);
  }
  p->output = in;
  p->scales.assign(in.size(), 1.0);
  if (policy == "stretch") {
    for (size_t i = 0; i < axes.size(); ++i) {
      size_t d = size_t(axes[i]);
      p->output[d] = sizes[i];
      p->scales[d] = in[d] == 0 ? 1.0 : double(sizes[i]) / double(in[d]);
    }
    return Status::ok();
  }
  double scale = policy == "not_larger" ? 1e300 : 0.0;
  for (size_t i = 0; i < axes.size(); ++i) {
    if (in[size_t(axes[i])] == 0) continue;  // stays empty whatever the scale
    double s = double(sizes[i]) / double(in[size_t(axes[i])]);
    scale = policy == "not_larger" ? std::min(scale, s) : std::max(scale, s);
  }
  for (int64_t axis : axes) {
    p->output[size_t(axis)] = int64_t(std::round(scale * double(in[size_t(axis)])));
    p->scales[size_t(axis)] = scale;
  }
  return Status::ok();
}

Status resolve_scales_and_sizes(const NodeInputs& node, ResizeParams* p) {
  const Shape& in = node.input_shape(0);
  int64_t rank = int64_t(in.size());
  std::vector<int64_t> axes;
  STRIDER_ASSIGN_OR_RETURN(axes, node.attributes().get_ints("axes", {}));
  for (int64_t& a : axes)
    if (!normalize_axis(a, rank, &a)) return node.error("axis {} out of range", a);
  if (axes.empty())
    for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
  ResizeInputs layout = input_layout(node);
  bool has_scales = present(node, layout.scales) || node.attributes().has("scales");
  bool has_sizes = present(node, layout.sizes);
  if (has_scales == has_sizes) return node.error("exactly one of scales and sizes must be given");
  if (has_sizes) {
    STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> sizes, node.constant_ints(size_t(layout.sizes), "sizes"));
    return resolve_sizes(node, sizes, axes, p);
  }
  std::vector<double> scales;
  if (layout.scales >= 0) {
    STRIDER_ASSIGN_OR_RETURN(scales, node.constant_floats(size_t(layout.scales), "scales"));
  } else {
    STRIDER_ASSIGN_OR_RETURN(std::vector<float> attr, node.attributes().get_floats("scales", {}));
    scales.assign(attr.begin(), attr.end());
  }
  STRIDER_ASSIGN_OR_RETURN(p->scales, spread_over_axes(node, scales, axes, rank, 1.0));
  p->output = in;
  for (size_t d = 0; d < in.size(); ++d) {
    if (!(p->scales[d] > 0) || !std::isfinite(p->scales[d]))
      return node.error("scale {} on dim {} is not a positive number", p->scales[d], d);
    // The spec: floor(input_dimension * (roi_end - roi_start) * scale); the roi is
    // [0, 1] unless the mode is tf_crop_and_resize.
    double extent = p->roi_end[d] - p->roi_start[d];
    double size = std::floor(double(in[d]) * extent * p->scales[d]);
    if (!(size >= 0) || size > 9.0e15)
      return node.error("dim {} of size {} with scale {} and roi [{}, {}] gives {} elements", d,
                        in[d], p->scales[d], p->roi_start[d], p->roi_end[d], size);
    p->output[d] = int64_t(size);
  }
  return Status::ok();
}

Status resolve_roi(const NodeInputs& node, ResizeParams* p) {
  int64_t rank = node.input_rank(0);
  p->roi_start.assign(size_t(rank), 0.0);
  p->roi_end.assign(size_t(rank), 1.0);
  ResizeInputs layout = input_layout(node);
  if (p->coordinate_mode != CoordinateMode::kTfCropAndResize || !present(node, layout.roi))
    return Status::ok();
  STRIDER_ASSIGN_OR_RETURN(std::vector<double> roi, node.constant_floats(size_t(layout.roi), "roi"));
  STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> axes, node.attributes().get_ints("axes", {}));
  for (int64_t& a : axes)
    if (!normalize_axis(a, rank, &a)) return node.error("axis {} out of range", a);
  if (axes.empty())
    for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
  if (roi.size() != 2 * axes.size()) return node.error("roi has {} values for {} axes", roi.size(), axes.size());
  for (size_t i = 0; i < axes.size(); ++i) {
    p->roi_start[size_t(axes[i])] = roi[i];
    p->roi_end[size_t(axes[i])] = roi[axes.size() + i];
  }
  return Status::ok();
}

Status infer_resize(InferContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(ResizeParams p, resolve_resize(ctx));
  ctx.set_output(0, ctx.input_dtype(0), p.output);
  return Status::ok();
}

}  // namespace

Result<ResizeParams> resolve_resize(const NodeInputs& node) {
  ResizeParams p;
  STRIDER_RETURN_IF_ERROR(parse_modes(node, &p));
  STRIDER_RETURN_IF_ERROR(resolve_roi(node, &p));  // the output size from scales needs it
  STRIDER_RETURN_IF_ERROR(resolve_scales_and_sizes(node, &p));
  return p;
}

void register_resize_ops(std::vector<OpSchema>& ops) {
  ops.push_back({"Resize", infer_resize, {1, 2}, {1, 2, 3}});
  ops.push_back({"Upsample", infer_resize, {1}, {1}});
}

}  // namespace strider
