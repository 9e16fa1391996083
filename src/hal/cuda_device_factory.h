// The one entry point into the CUDA backend, so shared code has no #ifdef. A build with
// nvcc compiles the backend into a plugin, libstrider_cuda.so, that hal/cuda_loader.cc
// loads the first time a cuda device is asked for: a CPU-only process never maps cuDNN,
// cuBLASLt or the CUDA runtime (they cost about 190 MiB resident at start), and the same
// binary runs on a machine without them, saying so when cuda is asked for. A build
// without nvcc links hal/no_cuda/ instead, which always fails with a clear error.
// tests/cuda link the backend directly (src/hal/cuda/direct_factory.cc).
#pragma once

#include <memory>

#include "hal/device.h"

namespace strider {

// `ordinal` is N of "cuda:N". DEVICE_ERROR when there is no usable GPU, or the plugin (or a
// library it needs) cannot be loaded.
Result<std::unique_ptr<Device>> create_cuda_device(int ordinal, const DeviceOptions& options);

// How many GPUs the CUDA runtime sees (cudaGetDeviceCount: no context is made on any of
// them). DEVICE_ERROR as create_cuda_device's when the backend is not there; 0 GPUs is a
// count, not an error.
Result<int> cuda_device_count();

// Bumped whenever what crosses into the plugin changes (DeviceOptions, Device, Kernel,
// KernelRequest, Graph, TensorView, Status): a plugin of another ABI is refused.
inline constexpr int kCudaPluginAbi = 3;  // 2: Device::declines; 3: the device count
inline constexpr const char* kCudaPluginName = "libstrider_cuda.so";

}  // namespace strider
