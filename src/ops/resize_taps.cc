// Resize's per-axis taps (see resize_taps.h).
#include "ops/resize_taps.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace strider {
namespace {

double original_coordinate(const ResizeParams& p, const ResizeAxisGeometry& a, int64_t x_int) {
  const double x = double(x_int), in = double(a.in);
  // The output length before flooring: the reference uses it for align_corners (and the
  // node test for downscaling with align_corners depends on it) and the spec for
  // half_pixel_symmetric.
  const double length = a.scale * in;
  switch (p.coordinate_mode) {
    case CoordinateMode::kHalfPixel: return (x + 0.5) / a.scale - 0.5;
    case CoordinateMode::kHalfPixelSymmetric: {
      double adjustment = double(a.out) / length;
      double offset = in / 2 * (1 - adjustment);
      return offset + (x + 0.5) / a.scale - 0.5;
    }
    case CoordinateMode::kPytorchHalfPixel: return a.out > 1 ? (x + 0.5) / a.scale - 0.5 : 0.0;
    case CoordinateMode::kAlignCorners: return length == 1 ? 0.0 : x * (in - 1) / (length - 1);
    case CoordinateMode::kAsymmetric: return x / a.scale;
    case CoordinateMode::kTfHalfPixelForNearest: return (x + 0.5) / a.scale;
    case CoordinateMode::kTfCropAndResize: {
      // The spec's lengths: the crop is mapped onto the whole integer output.
      double extent = a.roi_end - a.roi_start;
      if (a.out == 1) return 0.5 * (a.roi_start + a.roi_end) * (in - 1);
      return a.roi_start * (in - 1) + x * extent * (in - 1) / double(a.out - 1);
    }
  }
  return x;
}

int64_t nearest_position(const ResizeParams& p, const ResizeAxisGeometry& a, double x) {
  double base = std::ceil(x) - 1;
  double ratio = x - base;  // (0, 1]; 1 when x is an integer, which then is the answer
  bool upper = true;
  if (ratio < 1) {
    switch (p.nearest_mode) {
      case NearestMode::kRoundPreferFloor: upper = ratio > 0.5; break;
      case NearestMode::kRoundPreferCeil: upper = ratio >= 0.5; break;
      case NearestMode::kFloor: upper = false; break;
      case NearestMode::kCeil: upper = true; break;
    }
    // Before opset 11 there was no nearest_mode: floor when upscaling, ceil when
    // downscaling (the behaviour of that era's test data and of ONNX Runtime).
    if (a.legacy_downscale) upper = true;
  }
  return int64_t(base) + (upper ? 1 : 0);
}

// Keys' cubic convolution kernel with parameter A, at distance |s|.
double cubic_weight(double s, double a) {
  s = std::abs(s);
  if (s <= 1) return ((a + 2) * s - (a + 3)) * s * s + 1;
  if (s < 2) return ((a * s - 5 * a) * s + 8 * a) * s - 4 * a;
  return 0.0;
}

// Linear and cubic taps of one coordinate: first tap index (relative to base) and weights.
// Antialiasing stretches the filter by 1/scale when downscaling and normalizes it.
int64_t filter_taps(const ResizeParams& p, double scale, double ratio, std::vector<double>& w) {
  const bool cubic = p.mode == ResizeMode::kCubic;
  const double s = p.antialias ? std::min(scale, 1.0) : 1.0;
  const double support = cubic ? 2.0 : 1.0;
  const int64_t start = int64_t(std::floor(-support / s)) + 1;
  const int64_t count = 2 - 2 * start;
  w.resize(size_t(count));
  for (int64_t i = 0; i < count; ++i) {
    double d = s * (double(start + i) - ratio);
    w[size_t(i)] = cubic ? cubic_weight(d, p.cubic_coeff_a) : std::clamp(1 - std::abs(d), 0.0, 1.0);
  }
  if (p.antialias) {
    double sum = std::accumulate(w.begin(), w.end(), 0.0);
    if (sum != 0)
      for (double& v : w) v /= sum;
  }
  return start;
}

// Zeroes the weights of taps outside [0, in) and renormalizes the rest to sum 1.
void exclude_outside(int64_t first, int64_t in, std::vector<double>& w) {
  double sum = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    int64_t pos = first + int64_t(i);
    if (pos < 0 || pos >= in) w[i] = 0;
    sum += w[i];
  }
  if (sum != 0)
    for (double& v : w) v /= sum;
}

// A coordinate with one tap of weight 1 everywhere needs no weights at run time; taps of
// weight 0 are dropped to find those axes (identity axes of linear and cubic resizes).
void collapse_single_taps(ResizeTaps& t, int64_t out) {
  if (t.width == 1) return;
  std::vector<int64_t> offsets(static_cast<size_t>(out), 0);
  for (int64_t x = 0; x < out; ++x) {
    int nonzero = 0;
    for (int64_t k = 0; k < t.width; ++k) {
      double w = t.weights[size_t(x * t.width + k)];
      if (w == 0) continue;
      if (w != 1 || ++nonzero > 1) return;
      offsets[size_t(x)] = t.offsets[size_t(x * t.width + k)];
    }
    if (nonzero == 0) return;
  }
  t.width = 1;
  t.offsets = std::move(offsets);
  t.weights.assign(size_t(out), 1.0);
}

}  // namespace

Result<ResizeTaps> resize_axis_taps(const ResizeParams& p, const ResizeAxisGeometry& a, int64_t in_stride) {
  ResizeTaps t;
  t.outside.assign(size_t(a.out), 0);
  std::vector<double> w;
  for (int64_t x = 0; x < a.out; ++x) {
    double xo = original_coordinate(p, a, x);
    if (!std::isfinite(xo))
      return invalid_argument(
          fmt::format("output coordinate {} maps to input coordinate {}", x, xo));
    if (p.coordinate_mode == CoordinateMode::kTfCropAndResize && (xo < 0 || xo > double(a.in - 1)))
      t.outside[size_t(x)] = 1;
    // Valid parameters keep xo inside (-1, in); a wild roi must not overflow the indices.
    xo = std::clamp(xo, -2.0, double(a.in) + 1);
    int64_t first = 0;
    if (p.mode == ResizeMode::kNearest) {
      first = nearest_position(p, a, xo);
      w.assign(1, 1.0);
    } else {
      double base = std::ceil(xo) - 1;
      first = int64_t(base) + filter_taps(p, a.scale, xo - base, w);
      if (p.exclude_outside) exclude_outside(first, a.in, w);
    }
    if (x == 0) t.width = int64_t(w.size());
    for (size_t k = 0; k < w.size(); ++k) {
      int64_t pos = std::clamp<int64_t>(first + int64_t(k), 0, a.in - 1);
      t.offsets.push_back(pos * in_stride);
      t.weights.push_back(w[k]);
    }
  }
  collapse_single_taps(t, a.out);
  t.in_stride = in_stride;
  t.identity = t.width == 1 && a.in == a.out;
  for (int64_t x = 0; x < a.out && t.identity; ++x)
    t.identity = t.offsets[size_t(x)] == x * in_stride && t.outside[size_t(x)] == 0;
  return t;
}


bool resize_legacy_nearest(const ResizeParams& p, const Node& node) {
  return p.mode == ResizeMode::kNearest && (node.op_type == "Upsample" || node.opset < 11);
}

ResizeAxisGeometry resize_axis_geometry(const ResizeParams& p, int64_t in, int64_t out, size_t d, bool legacy) {
  return ResizeAxisGeometry{in, out, p.scales[d], p.roi_start[d], p.roi_end[d], legacy && p.scales[d] < 1};
}

}  // namespace strider
