#include "hal/device_list.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

#include "hal/cuda_device_factory.h"

namespace strider {
namespace {

std::optional<int> ordinal_of(std::string_view text) {
  int value = -1;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size() || value < 0) return std::nullopt;
  return value;
}

std::vector<std::string_view> split(std::string_view spec) {
  std::vector<std::string_view> parts;
  for (size_t start = 0;;) {
    const size_t comma = spec.find(',', start);
    parts.push_back(spec.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
    if (comma == std::string_view::npos) return parts;
    start = comma + 1;
  }
}

}  // namespace

Result<std::vector<std::string>> expand_device_list(std::string_view spec, const std::function<Result<int>()>& cuda_count) {
  std::vector<std::string> devices;
  bool after_cuda = false;  // a bare number is another cuda ordinal
  for (std::string_view part : split(spec)) {
    std::vector<std::string> named;
    if (part == "cpu" || part == "sim") {
      named = {std::string(part)};
    } else if (part == "cuda") {
      named = {"cuda:0"};
    } else if (part == "cuda:all") {
      STRIDER_ASSIGN_OR_RETURN(int count, cuda_count());
      if (count <= 0) return device_error(fmt::format("device list '{}': cuda:all, but CUDA sees no GPU", spec));
      for (int i = 0; i < count; ++i) named.push_back(fmt::format("cuda:{}", i));
    } else if (part.rfind("cuda:", 0) == 0 && ordinal_of(part.substr(5))) {
      named = {fmt::format("cuda:{}", *ordinal_of(part.substr(5)))};
    } else if (after_cuda && ordinal_of(part)) {
      named = {fmt::format("cuda:{}", *ordinal_of(part))};
    } else {
      return invalid_argument(fmt::format("device list '{}': '{}' is not a device; give cpu, sim, cuda, cuda:N, "
                                          "cuda:all, or a comma list of them such as cuda:0,1", spec, part));
    }
    for (std::string& device : named) {
      if (std::find(devices.begin(), devices.end(), device) != devices.end())
        return invalid_argument(fmt::format("device list '{}' names {} twice", spec, device));
      devices.push_back(std::move(device));
    }
    after_cuda = devices.back().rfind("cuda:", 0) == 0;
  }
  return devices;
}

Result<std::vector<std::string>> expand_device_list(std::string_view spec) {
  return expand_device_list(spec, [] { return cuda_device_count(); });
}

}  // namespace strider
