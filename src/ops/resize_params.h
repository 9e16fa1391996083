// Resize (opsets 10-19) and Upsample (7-9) parameters, normalized per dimension, shared by
// the shape function and every kernel.
#pragma once

#include <string>
#include <vector>

#include "ops/op_registry.h"

namespace strider {

enum class ResizeMode { kNearest, kLinear, kCubic };
enum class CoordinateMode {
  kHalfPixel,
  kHalfPixelSymmetric,
  kPytorchHalfPixel,
  kAlignCorners,
  kAsymmetric,
  kTfCropAndResize,
  kTfHalfPixelForNearest,  // Resize-11 only: (x + 0.5) / scale
};
enum class NearestMode { kRoundPreferFloor, kRoundPreferCeil, kFloor, kCeil };

struct ResizeParams {
  ResizeMode mode = ResizeMode::kNearest;
  CoordinateMode coordinate_mode = CoordinateMode::kHalfPixel;
  NearestMode nearest_mode = NearestMode::kRoundPreferFloor;
  double cubic_coeff_a = -0.75;
  bool exclude_outside = false;
  double extrapolation_value = 0.0;
  bool antialias = false;
  Shape output;                 // full output shape
  std::vector<double> scales;   // per dim: output / input as the spec defines it
  std::vector<double> roi_start;  // per dim, normalized [0, 1] (tf_crop_and_resize)
  std::vector<double> roi_end;
};

Result<ResizeParams> resolve_resize(const NodeInputs& node);

}  // namespace strider
