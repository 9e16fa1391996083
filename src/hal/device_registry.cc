// The devices strider knows, by name.
#include <fmt/format.h>

#include <cstdlib>

#include "hal/cpu/cpu_device.h"
#include "hal/cuda_device_factory.h"
#include "hal/sim/sim_device.h"

namespace strider {

Result<std::unique_ptr<Device>> create_device(std::string_view name, const DeviceOptions& options) {
  if (options.queues < 1 || options.queues > 16)
    return invalid_argument(fmt::format("--queues {}: give 1 to 16", options.queues));
  if (name == "cpu") return std::unique_ptr<Device>(new cpu::CpuDevice(options));
  if (name == "sim") return std::unique_ptr<Device>(new sim::SimDevice(options));
  if (name == "cuda") return create_cuda_device(0, options);
  if (name.rfind("cuda:", 0) == 0) {
    std::string ordinal(name.substr(5));
    char* end = nullptr;
    long value = std::strtol(ordinal.c_str(), &end, 10);
    if (!ordinal.empty() && *end == '\0' && value >= 0) return create_cuda_device(int(value), options);
  }
  return invalid_argument(fmt::format("unknown device '{}'; valid devices: cpu, sim, cuda, cuda:N", name));
}

}  // namespace strider
