#include "hal/device.h"

#include <new>

namespace strider {

Result<HostBuffer> Device::allocate_host(size_t bytes) {
  constexpr std::align_val_t kAlignment{64};
  auto* data = static_cast<std::byte*>(::operator new(bytes ? bytes : 1, kAlignment, std::nothrow));
  if (data == nullptr) return resource_exhausted("host buffer of " + std::to_string(bytes) + " bytes");
  return HostBuffer(data, bytes, [](std::byte* p) { ::operator delete(p, kAlignment); });
}

}  // namespace strider
