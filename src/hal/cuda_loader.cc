// create_cuda_device of a build with the CUDA backend: loads libstrider_cuda.so (once, never
// unloaded: devices and kernels made by it live in it) and asks it for the device. Where it
// looks, in order: beside the binary or library this code is in (and ../lib from there),
// the dynamic loader's own search (LD_LIBRARY_PATH, runpath), and the build tree this was
// compiled in. See hal/cuda_device_factory.h.
#include <dlfcn.h>
#include <fmt/format.h>
#include <sys/stat.h>

#include <mutex>
#include <string>
#include <vector>

#include "hal/cuda_device_factory.h"

namespace strider {
namespace {

using AbiFn = int (*)();
using CreateFn = void (*)(int, const DeviceOptions*, Result<std::unique_ptr<Device>>*);
using CountFn = int (*)();

struct Plugin {
  CreateFn create = nullptr;
  CountFn count = nullptr;
  std::string error;  // why it is not loaded
};

std::vector<std::string> candidates() {
  std::vector<std::string> paths;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&create_cuda_device), &info) != 0 && info.dli_fname != nullptr) {
    std::string self = info.dli_fname;
    std::string dir = self.find('/') == std::string::npos ? "." : self.substr(0, self.rfind('/'));
    paths.push_back(dir + "/" + kCudaPluginName);
    paths.push_back(dir + "/../lib/" + kCudaPluginName);
  }
  paths.push_back(kCudaPluginName);
  paths.push_back(STRIDER_CUDA_PLUGIN_BUILD_PATH);
  return paths;
}

bool exists(const std::string& path) {
  struct stat s {};
  return path.find('/') != std::string::npos && stat(path.c_str(), &s) == 0;
}

Plugin load() {
  Plugin plugin;
  std::string first_error;
  for (const std::string& path : candidates()) {
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      // A plugin that exists but cannot load (a missing libcudnn) says more than a path that is not there.
      const char* why = dlerror();
      if (why && (first_error.empty() || exists(path))) first_error = why;
      continue;
    }
    auto abi = reinterpret_cast<AbiFn>(dlsym(handle, "strider_cuda_plugin_abi"));
    auto create = reinterpret_cast<CreateFn>(dlsym(handle, "strider_cuda_plugin_create"));
    auto count = reinterpret_cast<CountFn>(dlsym(handle, "strider_cuda_plugin_device_count"));
    if (abi == nullptr || create == nullptr || count == nullptr || abi() != kCudaPluginAbi) {
      first_error = fmt::format("{} is not a strider CUDA plugin of this build (ABI {})", path, kCudaPluginAbi);
      continue;
    }
    plugin.create = create;
    plugin.count = count;
    return plugin;
  }
  plugin.error = first_error.empty() ? std::string("not found") : first_error;
  return plugin;
}

const Plugin& plugin() {
  static const Plugin loaded = load();  // thread-safe, once per process
  return loaded;
}

Status unavailable(const Plugin& plugin) {
  return device_error(fmt::format("cuda is unavailable: the CUDA backend ({}) could not be loaded: {}",
                                  kCudaPluginName, plugin.error));
}

}  // namespace

Result<int> cuda_device_count() {
  if (plugin().count == nullptr) return unavailable(plugin());
  return plugin().count();
}

Result<std::unique_ptr<Device>> create_cuda_device(int ordinal, const DeviceOptions& options) {
  const Plugin& plugin = strider::plugin();
  if (plugin.create == nullptr) return unavailable(plugin);
  Result<std::unique_ptr<Device>> device = internal_error("the CUDA plugin returned nothing");
  plugin.create(ordinal, &options, &device);
  return device;
}

}  // namespace strider
