// The devices a process may spread work over, by name, for servers that run instances of a
// model on every GPU of a host (as Triton's instance groups do).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "strider/status.h"

namespace strider {

// The devices a device list names, each a SessionOptions::device: "cpu", "sim", "cuda",
// "cuda:N", "cuda:all" (every GPU the CUDA runtime sees, in order), and comma-separated
// lists of these, where a bare number after a cuda device is another ordinal ("cuda:0,1" is
// "cuda:0,cuda:1"; "cuda" is "cuda:0"). INVALID_ARGUMENT for an unknown name, a device named
// twice or an empty list; DEVICE_ERROR for "cuda:all" where CUDA is not there or sees no
// GPU. Opens no device and makes no GPU context: it asks the CUDA runtime only how many
// GPUs there are, and only for "cuda:all". Does not check that cuda:N exists; a session on
// it says so.
Result<std::vector<std::string>> expand_device_list(std::string_view spec);

}  // namespace strider
