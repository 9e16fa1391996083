// libstrider_cuda.so's entry points, found by hal/cuda_loader.cc with dlsym. The plugin
// carries its own copy of the strider code it uses (the static libraries, their symbols
// kept local), so it shares no state with the process that loads it beyond the objects it
// is handed: same compiler, same sources, same layouts (checked by the ABI number).
#include "hal/cuda/cuda_device.h"
#include "hal/cuda_device_factory.h"

extern "C" {

__attribute__((visibility("default"))) int strider_cuda_plugin_abi() { return strider::kCudaPluginAbi; }

__attribute__((visibility("default"))) void strider_cuda_plugin_create(
    int ordinal, const strider::DeviceOptions* options, strider::Result<std::unique_ptr<strider::Device>>* out) {
  *out = strider::cuda::CudaDevice::create(ordinal, *options);
}

__attribute__((visibility("default"))) int strider_cuda_plugin_device_count() {
  return strider::cuda::CudaDevice::count();
}

}  // extern "C"
