// The taps of a sliding window that land inside the input, per spatial axis.
//
// A window starting at `start` (output position * stride - pad_begin) with `kernel` taps
// `dilation` apart reads positions start + k * dilation. Only those in [0, in) read data;
// iterating just them, rather than all `kernel` taps and skipping the rest, keeps a
// pool's cost at most the input's extent per window whatever kernel a model declares
// (a 2^32 kernel with SAME padding is 2^32 taps of padding per window, and spun for
// minutes). Shared by the CPU and CUDA kernels; the float64 reference computes its own.
#pragma once

#include <cstdint>

#include "base/host_device.h"

namespace strider {

struct TapRange {
  int64_t first = 0;  // first tap index k inside the input
  int64_t end = 0;    // one past the last (end <= first: none)
};

// Geometry validated by resolve_window (no term overflows); dilation >= 1.
STRIDER_HOST_DEVICE TapRange taps_inside(int64_t start, int64_t dilation, int64_t kernel, int64_t in) {
  TapRange r;
  r.first = start >= 0 ? 0 : (-start + dilation - 1) / dilation;
  int64_t last_position = in - 1 - start;  // the largest k * dilation still inside
  r.end = last_position < 0 ? 0 : last_position / dilation + 1;
  if (r.end > kernel) r.end = kernel;
  if (r.end < r.first) r.end = r.first;
  return r;
}

}  // namespace strider
