// RoiAlign (opsets 10, 16): parameters resolved once, and the sampling every kernel shares
// (the float64 reference has its own).
//
// Each region of interest (x1, y1, x2, y2 in input pixels times spatial_scale, shifted by
// half a pixel in half_pixel mode) is cut into out_h x out_w bins; each bin is sampled on a
// grid (sampling_ratio per side, or ceil(bin size) when it is 0) by bilinear interpolation,
// and the samples averaged (avg) or, in max mode, the largest weighted corner of any sample
// taken (ONNX Runtime's definition, which the node tests follow). A sample more than one
// pixel outside the input reads 0; one within it reads the clamped edge.
#pragma once

#include <cstdint>
#include <vector>

#include "ops/op_registry.h"

namespace strider {

struct RoiAlignParams {
  bool average = true;
  bool half_pixel = true;
  int64_t out_h = 1, out_w = 1, sampling_ratio = 0;
  double spatial_scale = 1.0;
  Shape out;  // [rois, C, out_h, out_w]
};

Result<RoiAlignParams> resolve_roi_align(const NodeInputs& node);

namespace roi_align {

// The most samples one region may take (a hostile region of 2^40 pixels would otherwise
// ask for that many): an error at run time, naming the region.
inline constexpr int64_t kMaxSamples = int64_t(1) << 24;

// One bilinear sample: four plane offsets (y * width + x) and their weights.
struct Sample {
  int64_t offset[4] = {0, 0, 0, 0};
  double weight[4] = {0, 0, 0, 0};
};

// The samples of one region, bin by bin (row-major over out_h x out_w), grid_h x grid_w
// samples per bin in row-major order.
struct RegionSamples {
  int64_t grid_h = 0, grid_w = 0;
  std::vector<Sample> samples;
};

Result<RegionSamples> region_samples(const RoiAlignParams& p, const double box[4], int64_t height, int64_t width);

}  // namespace roi_align
}  // namespace strider
