// Allocation: the one object that stands for one block of device memory.
//
// Identity is the allocation, never a raw pointer (docs/MEMORY_MODEL.md rule 1): every TensorView
// names its root Allocation plus an absolute byte offset, so two views of the same bytes
// are always recognizably the same memory, whatever their offsets.
//
// Ownership: an Allocation is owned by the Device that made it (src/hal/). Views hold a
// non-owning pointer; the owner guarantees the allocation outlives every view of it and
// every command that uses it (release is ordered after the last use completes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "strider/options.h"

namespace strider {

// Where the bytes live: StorageMode (strider/options.h), a performance policy, never a
// correctness knob (docs/MEMORY_MODEL.md rule 4).

class Allocation {
 public:
  // `address` is the base address in the owning device's address space. For memory the
  // host can read directly (CPU device, host or unified modes) it is also a host pointer.
  Allocation(uint64_t id, std::string label, std::string_view device_name, std::byte* address,
             int64_t size, int64_t alignment, StorageMode mode, bool host_accessible)
      : id_(id),
        label_(std::move(label)),
        device_name_(device_name),
        address_(address),
        size_(size),
        alignment_(alignment),
        mode_(mode),
        host_accessible_(host_accessible) {}
  Allocation(const Allocation&) = delete;
  Allocation& operator=(const Allocation&) = delete;

  uint64_t id() const { return id_; }
  // "arena#0", "const:conv1.weight", "input:images": used in every error and plan dump.
  const std::string& label() const { return label_; }
  std::string_view device_name() const { return device_name_; }
  std::byte* address() const { return address_; }
  int64_t size() const { return size_; }
  int64_t alignment() const { return alignment_; }
  StorageMode storage_mode() const { return mode_; }
  bool host_accessible() const { return host_accessible_; }

 private:
  uint64_t id_;
  std::string label_;
  std::string_view device_name_;
  std::byte* address_;
  int64_t size_;
  int64_t alignment_;
  StorageMode mode_;
  bool host_accessible_;
};

}  // namespace strider
