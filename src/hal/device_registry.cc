// The devices strider knows, by name.
#include <fmt/format.h>

#include "hal/cpu/cpu_device.h"
#include "hal/sim/sim_device.h"

namespace strider {

Result<std::unique_ptr<Device>> create_device(std::string_view name, const DeviceOptions& options) {
  if (options.queues < 1 || options.queues > 16)
    return invalid_argument(fmt::format("--queues {}: give 1 to 16", options.queues));
  if (name == "cpu") return std::unique_ptr<Device>(new cpu::CpuDevice(options));
  if (name == "sim") return std::unique_ptr<Device>(new sim::SimDevice(options));
  return invalid_argument(fmt::format("unknown device '{}'; valid devices: cpu, sim", name));
}

}  // namespace strider
