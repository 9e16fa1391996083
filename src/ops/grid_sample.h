// GridSample (opsets 16, 20) and AffineGrid (opset 20): parameters resolved once, and the
// sampling math every kernel shares (the float64 reference has its own).
//
// GridSample reads X [N, C, D1..Dr] at the points grid [N, H1..Hr, r] gives, normalized to
// [-1, 1] with the coordinate of the LAST spatial dim first (x, y, z), writing
// Y [N, C, H1..Hr]. Per spatial axis a point becomes up to four taps (index, weight); an
// output element is the sum over the product of its axes' taps. PyTorch's semantics, which
// ONNX adopted: the coordinate is unnormalized (align_corners: -1 and 1 are the centres of
// the corner pixels; else their outer edges), then, if outside the border, clamped
// (border) or reflected (reflection); nearest rounds half to even in 2-D and away from
// zero in 3-D; a tap outside the input reads 0 (zeros), the edge (border) or its
// reflection (reflection).
#pragma once

#include <cmath>
#include <cstdint>

#include "ops/op_registry.h"

namespace strider {

enum class GridSampleMode { kLinear, kNearest, kCubic };
enum class GridPadding { kZeros, kBorder, kReflection };

struct GridSampleParams {
  GridSampleMode mode = GridSampleMode::kLinear;
  GridPadding padding = GridPadding::kZeros;
  bool align_corners = false;
  int spatial_rank = 0;
};

Result<GridSampleParams> resolve_grid_sample(const NodeInputs& node);

namespace grid_sample {

// Up to four taps of one axis: index kOutside reads zero.
inline constexpr int64_t kOutside = -1;
struct AxisTaps {
  int count = 0;
  int64_t index[4] = {0, 0, 0, 0};
  double weight[4] = {0, 0, 0, 0};
};

inline double reflect(double x, double low, double high) {
  const double range = high - low;
  if (range <= 0) return low;
  if (x < low) {
    const double dx = low - x;
    const double n = std::trunc(dx / range), r = dx - n * range;
    return std::fmod(n, 2.0) == 0 ? low + r : high - r;
  }
  if (x > high) {
    const double dx = x - high;
    const double n = std::trunc(dx / range), r = dx - n * range;
    return std::fmod(n, 2.0) == 0 ? high - r : low + r;
  }
  return x;
}

// The input index a tap at integer position i reads under the padding mode.
inline int64_t padded_index(int64_t i, int64_t size, const GridSampleParams& p) {
  if (i >= 0 && i < size) return i;
  switch (p.padding) {
    case GridPadding::kZeros: return kOutside;
    case GridPadding::kBorder: return i < 0 ? 0 : size - 1;
    case GridPadding::kReflection: {
      const double low = p.align_corners ? 0.0 : -0.5, high = p.align_corners ? double(size - 1) : double(size) - 0.5;
      const int64_t r = int64_t(reflect(double(i), low, high));
      return r < 0 ? 0 : r >= size ? size - 1 : r;
    }
  }
  return kOutside;
}

// Keys' cubic convolution weights (a = -0.75) for the four taps around fraction t.
inline void cubic_weights(double t, double* w) {
  constexpr double a = -0.75;
  auto near = [](double x) { return ((a + 2) * x - (a + 3)) * x * x + 1; };
  auto far = [](double x) { return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a; };
  w[0] = far(t + 1);
  w[1] = near(t);
  w[2] = near(1 - t);
  w[3] = far(2 - t);
}

// The taps of one axis of `size` for normalized coordinate n.
inline AxisTaps axis_taps(double n, int64_t size, const GridSampleParams& p) {
  double x = p.align_corners ? (n + 1) / 2 * double(size - 1) : ((n + 1) * double(size) - 1) / 2;
  if (p.mode == GridSampleMode::kNearest)
    x = std::nearbyint(x);
  const double low = p.align_corners ? 0.0 : -0.5, high = p.align_corners ? double(size - 1) : double(size) - 0.5;
  if (x < low || x > high) {
    if (p.padding == GridPadding::kBorder) x = std::fmin(std::fmax(x, 0.0), double(size - 1));
    else if (p.padding == GridPadding::kReflection) x = reflect(x, low, high);
  }
  AxisTaps t;
  if (std::isnan(x)) {  // a NaN coordinate reads nothing
    t.count = 1;
    t.index[0] = kOutside;
    return t;
  }
  x = std::fmin(std::fmax(x, -double(int64_t(1) << 40)), double(int64_t(1) << 40));  // keeps the int cast defined
  if (p.mode == GridSampleMode::kNearest) {
    t.count = 1;
    t.index[0] = padded_index(int64_t(x), size, p);
    t.weight[0] = 1;
    return t;
  }
  const double floor = std::floor(x), frac = x - floor;
  const int64_t i0 = int64_t(floor);
  if (p.mode == GridSampleMode::kLinear) {
    t.count = 2;
    t.index[0] = padded_index(i0, size, p);
    t.index[1] = padded_index(i0 + 1, size, p);
    t.weight[0] = 1 - frac;
    t.weight[1] = frac;
    return t;
  }
  t.count = 4;
  cubic_weights(frac, t.weight);
  for (int k = 0; k < 4; ++k) t.index[k] = padded_index(i0 - 1 + k, size, p);
  return t;
}

}  // namespace grid_sample

}  // namespace strider
