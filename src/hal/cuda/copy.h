// Strided device copies, shared by the data-movement kernels and by the CUDA device's
// uploads and downloads of non-dense views.
#pragma once

#include <cuda_runtime.h>

#include "memory/tensor_view.h"
#include "strider/status.h"

namespace strider::cuda {

// Enqueues on `stream` a copy of every element of `src` into the same position of `dst`
// (equal sizes and dtypes, any strides on either side, stride 0 in `src` broadcasts).
// Both views must be device-addressable (their allocation's address is a device address).
Status launch_copy(const TensorView& dst, const TensorView& src, cudaStream_t stream);
// Enqueues a copy of element i of `src` (row-major over its sizes) into element i of `dst`
// (row-major over its own sizes): equal element counts and dtypes, any strides. What a
// Reshape does when neither view can be seen in the other's sizes.
Status launch_reshape_copy(const TensorView& dst, const TensorView& src, cudaStream_t stream);

// Enqueues a one-thread kernel that keeps `stream` busy for about `microseconds` (for
// timing what follows it on the device alone: CudaQueue::time_device_only).
Status launch_delay(cudaStream_t stream, int microseconds);

}  // namespace strider::cuda
