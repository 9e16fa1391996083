// RoiAlign: parameters, shape function and the shared sampling (ops/roi_align.h).
#include "ops/roi_align.h"

#include <fmt/format.h>

#include <cmath>

namespace strider {
namespace {

Status infer_roi_align(InferContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(RoiAlignParams p, resolve_roi_align(ctx));
  ctx.set_output(0, ctx.input_dtype(0), p.out);
  return Status::ok();
}

// The bilinear sample at (y, x) of a height x width plane.
roi_align::Sample sample_at(double y, double x, int64_t height, int64_t width) {
  roi_align::Sample s;
  if (y < -1.0 || y > double(height) || x < -1.0 || x > double(width)) return s;  // reads 0
  y = std::max(y, 0.0);
  x = std::max(x, 0.0);
  int64_t y_low = int64_t(y), x_low = int64_t(x), y_high = y_low + 1, x_high = x_low + 1;
  if (y_low >= height - 1) y_high = y_low = height - 1, y = double(y_low);
  if (x_low >= width - 1) x_high = x_low = width - 1, x = double(x_low);
  const double ly = y - double(y_low), lx = x - double(x_low), hy = 1 - ly, hx = 1 - lx;
  s.offset[0] = y_low * width + x_low;
  s.offset[1] = y_low * width + x_high;
  s.offset[2] = y_high * width + x_low;
  s.offset[3] = y_high * width + x_high;
  s.weight[0] = hy * hx;
  s.weight[1] = hy * lx;
  s.weight[2] = ly * hx;
  s.weight[3] = ly * lx;
  return s;
}

}  // namespace

Result<RoiAlignParams> resolve_roi_align(const NodeInputs& node) {
  RoiAlignParams p;
  const Shape& x = node.input_shape(0);
  const Shape& rois = node.input_shape(1);
  const Shape& indices = node.input_shape(2);
  if (x.size() != 4) return node.error("X {} must be [N, C, H, W]", shape_to_string(x));
  if (!is_floating(node.input_dtype(0)) || node.input_dtype(1) != node.input_dtype(0))
    return node.error("X and rois must be of one floating type");
  if (rois.size() != 2 || rois[1] != 4 || indices != Shape{rois[0]} || !is_integral(node.input_dtype(2)))
    return node.error("rois {} must be [R, 4] and batch_indices {} [R] integers", shape_to_string(rois), shape_to_string(indices));
  STRIDER_ASSIGN_OR_RETURN(std::string mode, node.attributes().get_string("mode", "avg"));
  if (mode != "avg" && mode != "max") return node.error("mode '{}' is not avg or max", mode);
  p.average = mode == "avg";
  STRIDER_ASSIGN_OR_RETURN(std::string coordinates, node.attributes().get_string(
                                                         "coordinate_transformation_mode", node.opset() < 16 ? "output_half_pixel" : "half_pixel"));
  if (coordinates != "half_pixel" && coordinates != "output_half_pixel")
    return node.error("coordinate_transformation_mode '{}' is not half_pixel or output_half_pixel", coordinates);
  p.half_pixel = coordinates == "half_pixel";
  STRIDER_ASSIGN_OR_RETURN(p.out_h, node.attributes().get_int("output_height", 1));
  STRIDER_ASSIGN_OR_RETURN(p.out_w, node.attributes().get_int("output_width", 1));
  STRIDER_ASSIGN_OR_RETURN(p.sampling_ratio, node.attributes().get_int("sampling_ratio", 0));
  STRIDER_ASSIGN_OR_RETURN(float scale, node.attributes().get_float("spatial_scale", 1.0f));
  p.spatial_scale = scale;
  if (p.out_h < 1 || p.out_w < 1 || p.out_h > (int64_t(1) << 20) || p.out_w > (int64_t(1) << 20) || p.sampling_ratio < 0 ||
      p.sampling_ratio > 1024)
    return node.error("output {}x{} and sampling_ratio {} are out of range", p.out_h, p.out_w, p.sampling_ratio);
  p.out = {rois[0], x[1], p.out_h, p.out_w};
  return p;
}

namespace roi_align {

Result<RegionSamples> region_samples(const RoiAlignParams& p, const double box[4], int64_t height, int64_t width) {
  const double offset = p.half_pixel ? 0.5 : 0.0;
  const double start_w = box[0] * p.spatial_scale - offset, start_h = box[1] * p.spatial_scale - offset;
  double roi_w = box[2] * p.spatial_scale - offset - start_w, roi_h = box[3] * p.spatial_scale - offset - start_h;
  if (!std::isfinite(start_w) || !std::isfinite(start_h) || !std::isfinite(roi_w) || !std::isfinite(roi_h))
    return invalid_argument(fmt::format("region ({}, {}, {}, {}) is not finite", box[0], box[1], box[2], box[3]));
  if (!p.half_pixel) roi_w = std::max(roi_w, 1.0), roi_h = std::max(roi_h, 1.0);
  const double bin_h = roi_h / double(p.out_h), bin_w = roi_w / double(p.out_w);
  RegionSamples r;
  const double grid_h = p.sampling_ratio > 0 ? double(p.sampling_ratio) : std::ceil(bin_h);
  const double grid_w = p.sampling_ratio > 0 ? double(p.sampling_ratio) : std::ceil(bin_w);
  if (grid_h * grid_w * double(p.out_h * p.out_w) > double(kMaxSamples))
    return invalid_argument(fmt::format("region ({}, {}, {}, {}) takes more than {} samples", box[0], box[1], box[2], box[3],
                                        kMaxSamples));
  r.grid_h = std::max<int64_t>(int64_t(grid_h), 0);
  r.grid_w = std::max<int64_t>(int64_t(grid_w), 0);
  r.samples.reserve(size_t(r.grid_h * r.grid_w * p.out_h * p.out_w));
  for (int64_t ph = 0; ph < p.out_h; ++ph)
    for (int64_t pw = 0; pw < p.out_w; ++pw)
      for (int64_t iy = 0; iy < r.grid_h; ++iy) {
        const double y = start_h + double(ph) * bin_h + (double(iy) + 0.5) * bin_h / double(r.grid_h);
        for (int64_t ix = 0; ix < r.grid_w; ++ix) {
          const double x = start_w + double(pw) * bin_w + (double(ix) + 0.5) * bin_w / double(r.grid_w);
          r.samples.push_back(sample_at(y, x, height, width));
        }
      }
  return r;
}

}  // namespace roi_align

void register_roi_align_ops(std::vector<OpSchema>& ops) { ops.push_back({"RoiAlign", infer_roi_align, {}}); }

}  // namespace strider
