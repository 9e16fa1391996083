// The CUDA entry point of a build without nvcc.
#include "hal/cuda_device_factory.h"

namespace strider {

constexpr const char* kNoCuda = "this strider was built without CUDA (no nvcc was found when it was configured)";

Result<std::unique_ptr<Device>> create_cuda_device(int ordinal, const DeviceOptions& options) {
  return device_error(kNoCuda);
}

Result<int> cuda_device_count() { return device_error(kNoCuda); }

}  // namespace strider
