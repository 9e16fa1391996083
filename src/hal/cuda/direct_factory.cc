// The CUDA entry point linked straight into a binary (tests/cuda, which also call the
// backend's kernels directly); everything else reaches the backend through the plugin
// (plugin.cc, loaded by hal/cuda_loader.cc).
#include "hal/cuda/cuda_device.h"
#include "hal/cuda_device_factory.h"

namespace strider {

Result<std::unique_ptr<Device>> create_cuda_device(int ordinal, const DeviceOptions& options) {
  return cuda::CudaDevice::create(ordinal, options);
}

Result<int> cuda_device_count() { return cuda::CudaDevice::count(); }

}  // namespace strider
