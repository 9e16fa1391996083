// Triton's system shared-memory extension: a client on the server's machine puts tensors in
// POSIX shared memory (shm_open), registers a range of that object under a name, and then
// names the region, an offset and a byte size in an inference request instead of sending
// the bytes; outputs can be asked to land in a region the same way. On loopback a request
// then carries a few hundred bytes of JSON however large its tensors are: MobileNetV2's
// 602-KB image body capped 64 HTTP clients at 12409 requests/s on the H200 machine before
// anything ran (bench/RESULTS.md, session 13).
//
// Routes (http_routes.cc), as Triton's HTTP API spells them:
//   POST /v2/systemsharedmemory/region/{name}/register   {"key", "offset", "byte_size"}
//   POST /v2/systemsharedmemory/region/{name}/unregister, POST /v2/systemsharedmemory/unregister
//   GET  /v2/systemsharedmemory[/region/{name}]/status   [{"name", "key", "offset", "byte_size"}]
// and over gRPC (grpc_server.cc) SystemSharedMemoryRegister, SystemSharedMemoryUnregister
// (an empty name: every region) and SystemSharedMemoryStatus;
// and in a request, an input's or output's parameters "shared_memory_region",
// "shared_memory_byte_size" and "shared_memory_offset" (default 0, from the region's start).
//
// Ownership and lifetime: the registry maps each region once, read-write, at registration;
// a request holds the region it reads or writes (shared_ptr), so unregistering while a
// request uses it unmaps only when that request is done. Inputs are copied out of the
// region when the request is parsed, before anything runs; outputs are copied in after the
// run. The client owns the shared-memory object and what happens to its bytes while a
// request it sent is in flight, as in Triton. Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>

#include <nlohmann/json.hpp>

#include "strider/status.h"

namespace strider::serve {

struct SharedMemoryRegion;  // a registered range, mapped (shared_memory.cc)

// Bytes [offset, offset + byte_size) of a registered region, kept mapped while this lives.
struct SharedMemorySlice {
  std::shared_ptr<const SharedMemoryRegion> region;
  std::string region_name;
  uint64_t offset = 0, byte_size = 0;
  std::span<std::byte> bytes() const;
};

class SharedMemoryRegistry {
 public:
  // Regions one server keeps at most (each is a mapping and a file descriptor's worth).
  static constexpr size_t kMaxRegions = 4096;

  // Maps [offset, offset + byte_size) of the shared-memory object `key` ("/name", as
  // shm_open takes it) under `name`. INVALID_ARGUMENT for a name in use, a key that is not
  // one object name, a zero size or a range past the object's end; NOT_FOUND when there is
  // no such object.
  Status register_region(const std::string& name, const std::string& key, uint64_t offset, uint64_t byte_size);
  // NOT_FOUND when `name` is not registered.
  Status unregister(const std::string& name);
  void unregister_all();
  // Triton's status array: every region, or the one named (NOT_FOUND when it is not).
  Result<nlohmann::json> status(const std::optional<std::string>& name) const;
  // A request's range of region `name`: INVALID_ARGUMENT when the region is not registered
  // or the range does not lie inside it.
  Result<SharedMemorySlice> slice(const std::string& name, uint64_t offset, uint64_t byte_size) const;

 private:
  mutable std::mutex mutex_;
  std::map<std::string, std::shared_ptr<const SharedMemoryRegion>> regions_;  // under mutex_
};

}  // namespace strider::serve
