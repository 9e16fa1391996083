// Resize per axis: coordinate transformations, nearest rounding, and the linear and cubic
// kernels (with antialiasing), following the formulas of the Resize spec.
#include <algorithm>
#include <cmath>

#include "reference/resize.h"

namespace strider::ref {
namespace {

// x_original of output coordinate x. align_corners divides by the output length before
// flooring (scale * length_original), as the ONNX reference implementation and its node
// tests do; it differs from the integer length only when downscaling by a scale that does
// not give a whole length (ONNX Runtime uses the integer length there).
double original_coordinate(const ResizeConfig& c, const ResizeAxis& a, int64_t x) {
  const std::string& mode = c.coordinate_mode;
  double xr = double(x), in = double(a.in), out = double(a.out);
  double unfloored_out = a.scale * in;
  if (mode == "half_pixel") return (xr + 0.5) / a.scale - 0.5;
  if (mode == "half_pixel_symmetric") {
    double adjustment = out / unfloored_out;  // output_width_int / output_width
    double offset = in / 2 * (1 - adjustment);
    return offset + (xr + 0.5) / a.scale - 0.5;
  }
  if (mode == "pytorch_half_pixel") return a.out > 1 ? (xr + 0.5) / a.scale - 0.5 : 0.0;
  if (mode == "align_corners")
    return unfloored_out == 1 ? 0.0 : xr * (in - 1) / (unfloored_out - 1);
  if (mode == "tf_half_pixel_for_nn") return (xr + 0.5) / a.scale;
  if (mode == "tf_crop_and_resize") {
    if (a.out > 1)
      return a.roi_start * (in - 1) + xr * (a.roi_end - a.roi_start) * (in - 1) / (out - 1);
    return 0.5 * (a.roi_start + a.roi_end) * (in - 1);
  }
  return xr / a.scale;  // asymmetric
}

int64_t nearest_index(const ResizeConfig& c, const ResizeAxis& a, double x) {
  if (c.legacy_nearest) return int64_t(a.scale < 1 ? std::ceil(x) : std::floor(x));
  double floor = std::floor(x);
  if (x == floor) return int64_t(x);
  double ratio = x - floor;
  bool up = c.nearest_mode == "ceil" || (c.nearest_mode == "round_prefer_floor" && ratio > 0.5) ||
            (c.nearest_mode == "round_prefer_ceil" && ratio >= 0.5);
  return int64_t(floor) + (up ? 1 : 0);
}

// The linear (triangle) or cubic (Keys, parameter a) kernel at distance d.
double kernel(const ResizeConfig& c, double d) {
  d = std::fabs(d);
  if (c.mode == "linear") return std::max(0.0, 1.0 - d);
  double a = c.cubic_a;
  if (d <= 1) return ((a + 2) * d - (a + 3)) * d * d + 1;
  if (d < 2) return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a;
  return 0;
}

// Taps base + j around x, where base = ceil(x) - 1 puts x - base in (0, 1]. The kernel's
// support (1 for linear, 2 for cubic) is widened by 1/scale when antialiasing a downscale.
std::vector<Tap> kernel_taps(const ResizeConfig& c, const ResizeAxis& a, double x) {
  double s = c.antialias ? std::min(a.scale, 1.0) : 1.0;
  double support = c.mode == "linear" ? 1.0 : 2.0;
  int64_t base = int64_t(std::ceil(x)) - 1;
  double ratio = x - double(base);
  int64_t first = int64_t(std::floor(-support / s)) + 1;
  std::vector<Tap> taps;
  double sum = 0;
  for (int64_t j = first; j < 2 - first; ++j) {
    int64_t index = base + j;
    bool outside = index < 0 || index >= a.in;
    double w = c.exclude_outside && outside ? 0.0 : kernel(c, s * (double(j) - ratio));
    taps.push_back({std::clamp<int64_t>(index, 0, a.in - 1), w});
    sum += w;
  }
  if (c.antialias || c.exclude_outside)
    for (Tap& t : taps) t.weight /= sum;
  std::erase_if(taps, [](const Tap& t) { return t.weight == 0; });
  return taps;
}

}  // namespace

std::vector<CoordinateTaps> coordinate_taps(const ResizeConfig& config, const ResizeAxis& axis) {
  std::vector<CoordinateTaps> result(size_t(axis.out));
  for (int64_t o = 0; o < axis.out; ++o) {
    CoordinateTaps& t = result[size_t(o)];
    double x = original_coordinate(config, axis, o);
    if (config.coordinate_mode == "tf_crop_and_resize" && (x < 0 || x > double(axis.in - 1))) {
      t.outside = true;
      continue;
    }
    if (config.mode == "nearest") {
      t.taps.push_back({std::clamp<int64_t>(nearest_index(config, axis, x), 0, axis.in - 1), 1.0});
    } else {
      t.taps = kernel_taps(config, axis, x);
    }
  }
  return result;
}

}  // namespace strider::ref
