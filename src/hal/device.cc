#include "hal/device.h"

#include <new>

namespace strider {

Result<HostBuffer> Device::allocate_host(size_t bytes) {
  constexpr std::align_val_t kAlignment{64};
  auto* data = static_cast<std::byte*>(::operator new(bytes ? bytes : 1, kAlignment, std::nothrow));
  if (data == nullptr) return resource_exhausted("host buffer of " + std::to_string(bytes) + " bytes");
  return HostBuffer(data, bytes, [](std::byte* p) { ::operator delete(p, kAlignment); });
}

Status Device::upload_all(std::span<const Upload> uploads) {
  for (const Upload& u : uploads) STRIDER_RETURN_IF_ERROR(upload(*u.source, *u.destination));
  return Status::ok();
}

Status Device::download_all(std::span<const Download> downloads) {
  for (const Download& d : downloads) STRIDER_RETURN_IF_ERROR(download(*d.source, d.destination));
  return Status::ok();
}

}  // namespace strider
