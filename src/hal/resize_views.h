// Checks shared by every device's Resize kernel: the views it is given must be the node's
// input and output as resolved, because the taps were computed from the graph's shapes and
// the kernels trust the views' sizes.
#pragma once

#include "strider/status.h"
#include "hal/kernel.h"
#include "ops/resize_params.h"

namespace strider {

// INVALID_ARGUMENT naming the mismatch when the data input or output view is missing, the
// dtypes differ, a view's sizes differ from the resolved shapes, the output is a scalar, or
// an empty input dim would have to fill a non-empty output dim.
Status check_resize_views(const KernelRequest& r, const ResizeParams& p);

}  // namespace strider
