// Internal to the reference Resize/Upsample: the per-axis description of a resize and the
// taps (input indices and weights) of each output coordinate.
#pragma once

#include <string>
#include <vector>

#include "strider/status.h"

namespace strider::ref {

struct ResizeConfig {
  std::string mode = "nearest";  // nearest, linear, cubic
  std::string coordinate_mode = "asymmetric";
  std::string nearest_mode = "round_prefer_floor";
  bool legacy_nearest = false;  // before opset 11: floor when upscaling, ceil when downscaling
  double cubic_a = -0.75;
  bool exclude_outside = false;
  double extrapolation_value = 0;
  bool antialias = false;
  std::string aspect_policy = "stretch";
};

struct ResizeAxis {
  int64_t in = 0, out = 0;
  double scale = 1;                   // the scale of the coordinate transformation
  double roi_start = 0, roi_end = 1;  // tf_crop_and_resize only
};

struct Tap {
  int64_t index;  // clamped into the input
  double weight;
};

// The taps of one output coordinate; `outside` (tf_crop_and_resize) means the output
// element is the extrapolation value.
struct CoordinateTaps {
  std::vector<Tap> taps;
  bool outside = false;
};

// The taps of every output coordinate of `axis` (out entries).
std::vector<CoordinateTaps> coordinate_taps(const ResizeConfig& config, const ResizeAxis& axis);

}  // namespace strider::ref
