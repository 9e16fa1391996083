// The one entry point into the CUDA backend, so shared code has no #ifdef: the
// strider_hal_cuda target provides it (src/hal/cuda/ when nvcc was found, src/hal/no_cuda/
// otherwise, which always fails with a clear error).
#pragma once

#include <memory>

#include "hal/device.h"

namespace strider {

// `ordinal` is N of "cuda:N". DEVICE_ERROR when there is no usable GPU.
Result<std::unique_ptr<Device>> create_cuda_device(int ordinal, const DeviceOptions& options);

}  // namespace strider
