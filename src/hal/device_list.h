// expand_device_list (strider/devices.h) with the GPU count asked through `cuda_count`, so
// tests can give any count without GPUs.
#pragma once

#include <functional>

#include "strider/devices.h"

namespace strider {

Result<std::vector<std::string>> expand_device_list(std::string_view spec, const std::function<Result<int>()>& cuda_count);

}  // namespace strider
