#include "shared_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace strider::serve {

// One registered range of a shared-memory object, mapped read-write from the page that
// holds its first byte; unmapped when the last holder lets go.
struct SharedMemoryRegion {
  std::string key;
  uint64_t offset = 0, byte_size = 0;
  void* mapping = MAP_FAILED;
  size_t mapping_length = 0;
  std::byte* data = nullptr;  // the range's first byte, inside the mapping

  SharedMemoryRegion() = default;
  SharedMemoryRegion(const SharedMemoryRegion&) = delete;
  SharedMemoryRegion& operator=(const SharedMemoryRegion&) = delete;
  ~SharedMemoryRegion() {
    if (mapping != MAP_FAILED) munmap(mapping, mapping_length);
  }
};

std::span<std::byte> SharedMemorySlice::bytes() const { return {region->data + offset, size_t(byte_size)}; }

namespace {

// An object name as shm_open takes it: one leading '/', no other, something after it.
bool is_object_name(const std::string& key) {
  return key.size() > 1 && key.size() <= 255 && key[0] == '/' && key.find('/', 1) == std::string::npos;
}

Result<std::shared_ptr<SharedMemoryRegion>> map_region(const std::string& name, const std::string& key, uint64_t offset,
                                                       uint64_t byte_size) {
  const int fd = shm_open(key.c_str(), O_RDWR, 0);
  if (fd < 0)
    return errno == ENOENT ? not_found(fmt::format("shared memory region '{}': no shared-memory object '{}'", name, key))
                           : invalid_argument(fmt::format("shared memory region '{}': cannot open '{}': {}", name, key,
                                                          std::strerror(errno)));
  struct stat info {};
  const bool sized = fstat(fd, &info) == 0;
  const uint64_t object_size = sized ? uint64_t(info.st_size) : 0;
  if (!sized || offset > object_size || byte_size > object_size - offset) {
    close(fd);
    return invalid_argument(fmt::format("shared memory region '{}': bytes [{}, {}) lie past the end of '{}' ({} bytes)", name,
                                        offset, offset + byte_size, key, object_size));
  }
  const uint64_t page = uint64_t(sysconf(_SC_PAGESIZE));
  const uint64_t start = offset / page * page;
  auto region = std::make_shared<SharedMemoryRegion>();
  region->key = key, region->offset = offset, region->byte_size = byte_size;
  region->mapping_length = size_t(offset - start + byte_size);
  region->mapping = mmap(nullptr, region->mapping_length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, off_t(start));
  const int map_errno = errno;
  close(fd);  // the mapping keeps the object
  if (region->mapping == MAP_FAILED)
    return invalid_argument(fmt::format("shared memory region '{}': cannot map '{}': {}", name, key, std::strerror(map_errno)));
  region->data = static_cast<std::byte*>(region->mapping) + (offset - start);
  return region;
}

nlohmann::json region_status(const std::string& name, const SharedMemoryRegion& r) {
  return {{"name", name}, {"key", r.key}, {"offset", r.offset}, {"byte_size", r.byte_size}};
}

}  // namespace

Status SharedMemoryRegistry::register_region(const std::string& name, const std::string& key, uint64_t offset,
                                             uint64_t byte_size) {
  if (name.empty()) return invalid_argument("a shared memory region needs a name");
  if (!is_object_name(key))
    return invalid_argument(fmt::format("shared memory region '{}': key '{}' is not a shared-memory object name (\"/name\")",
                                        name, key));
  if (byte_size == 0) return invalid_argument(fmt::format("shared memory region '{}': byte_size must be positive", name));
  {
    std::lock_guard lock(mutex_);
    if (regions_.count(name)) return invalid_argument(fmt::format("shared memory region '{}' is already registered", name));
    if (regions_.size() >= kMaxRegions)
      return invalid_argument(fmt::format("shared memory region '{}': {} regions are registered already", name, kMaxRegions));
  }
  // Mapped outside the lock: registering one region does not hold up requests using others.
  STRIDER_ASSIGN_OR_RETURN(std::shared_ptr<SharedMemoryRegion> region, map_region(name, key, offset, byte_size));
  std::lock_guard lock(mutex_);
  if (!regions_.emplace(name, std::move(region)).second)  // two registrations of one name raced
    return invalid_argument(fmt::format("shared memory region '{}' is already registered", name));
  return Status::ok();
}

Status SharedMemoryRegistry::unregister(const std::string& name) {
  std::lock_guard lock(mutex_);
  if (regions_.erase(name) == 0) return not_found(fmt::format("no shared memory region '{}' is registered", name));
  return Status::ok();
}

void SharedMemoryRegistry::unregister_all() {
  std::lock_guard lock(mutex_);
  regions_.clear();
}

Result<nlohmann::json> SharedMemoryRegistry::status(const std::optional<std::string>& name) const {
  std::lock_guard lock(mutex_);
  nlohmann::json list = nlohmann::json::array();
  if (name) {
    auto it = regions_.find(*name);
    if (it == regions_.end()) return not_found(fmt::format("no shared memory region '{}' is registered", *name));
    list.push_back(region_status(it->first, *it->second));
    return list;
  }
  for (const auto& [region_name, region] : regions_) list.push_back(region_status(region_name, *region));
  return list;
}

Result<SharedMemorySlice> SharedMemoryRegistry::slice(const std::string& name, uint64_t offset, uint64_t byte_size) const {
  std::lock_guard lock(mutex_);
  auto it = regions_.find(name);
  if (it == regions_.end()) return invalid_argument(fmt::format("no shared memory region '{}' is registered", name));
  const SharedMemoryRegion& r = *it->second;
  if (offset > r.byte_size || byte_size > r.byte_size - offset)
    return invalid_argument(fmt::format("bytes [{}, {}) of shared memory region '{}' lie past its {} bytes", offset,
                                        offset + byte_size, name, r.byte_size));
  return SharedMemorySlice{it->second, name, offset, byte_size};
}

}  // namespace strider::serve
