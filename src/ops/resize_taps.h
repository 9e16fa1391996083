// Resize's per-axis taps, shared by the CPU and CUDA kernels so they cannot disagree.
//
// Resize is separable: along each axis, every output coordinate reads a few input
// positions (taps) with weights that depend only on that coordinate. The formulas follow
// the ONNX reference implementation (onnx/reference/ops/op_resize.py), which produced the
// ONNX node tests: x_original comes from the coordinate transformation; with
// base = ceil(x_original) - 1 and ratio = x_original - base in (0, 1] the taps are
// base + i for a window of i around 0, their positions clamped into the input (edge
// padding). Where the reference departs from the spec text, the spec wins:
// pytorch_half_pixel maps a length-1 output to 0 (the reference: -0.5), tf_crop_and_resize
// uses the integer output length. Weights of 0 are dropped only on axes that then need a
// single tap (so NaN or Inf inputs under a zero weight do not reach those outputs).
#pragma once

#include <cstdint>
#include <vector>

#include "ops/resize_params.h"

namespace strider {

// One axis: the output length, the input length and what the coordinate transformation
// needs to know about it.
struct ResizeAxisGeometry {
  int64_t in = 1;
  int64_t out = 1;
  double scale = 1.0;
  double roi_start = 0.0;
  double roi_end = 1.0;
  bool legacy_downscale = false;  // Resize-10 nearest on a downscaled axis rounds up
};

// The taps of one axis: `width` per output coordinate, positions already clamped into the
// input and multiplied by its stride.
struct ResizeTaps {
  int64_t width = 1;
  std::vector<int64_t> offsets;  // [out * width], element offsets into the input
  std::vector<double> weights;   // [out * width]
  std::vector<uint8_t> outside;  // [out]; tf_crop_and_resize: the element is extrapolated
  // Output coordinate x reads input x alone (an axis not resized): the run loop then reads
  // with a plain stride, which vectorizes for the channels of a channels-last tensor.
  bool identity = false;
  int64_t in_stride = 0;
};

// Upsample and Resize before opset 11 have no nearest_mode: nearest rounds down when
// upscaling and up when downscaling (ResizeAxisGeometry::legacy_downscale).
bool resize_legacy_nearest(const ResizeParams& p, const Node& node);
// The geometry of dim `d` for an input of length `in` resized to `out`.
ResizeAxisGeometry resize_axis_geometry(const ResizeParams& p, int64_t in, int64_t out, size_t d, bool legacy);
// The taps of one axis whose input elements are `in_stride` elements apart. An error when
// an output coordinate maps to a non-finite input coordinate.
Result<ResizeTaps> resize_axis_taps(const ResizeParams& p, const ResizeAxisGeometry& a, int64_t in_stride);

}  // namespace strider
