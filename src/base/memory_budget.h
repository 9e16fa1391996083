// MemoryBudget: the bytes a session may hold, and who holds them.
//
// A 200-byte model can ask for a terabyte: an input declared [2^38], a ConstantOfShape of
// 2^36 elements folded at session creation, an arena for a Range of 2^38. Every
// allocation strider makes for a session (the imported and folded constants, the arena,
// inputs, outputs, constants on the device) reserves its bytes here first, so asking for
// too much is one RESOURCE_EXHAUSTED error naming what asked and how many bytes, before
// any memory is touched, instead of an abort in the allocator or the OOM killer.
//
// A budget may have a parent (a DynamicSession's, shared by the sessions it caches): a
// reservation must fit both, and whatever a child still holds when it is destroyed goes
// back to the parent, so a session evicted from a cache returns its bytes.
//
// Thread-safe: reservations are atomic (queues release memory from worker threads).
#pragma once

#include "strider/options.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "strider/status.h"

namespace strider {

class MemoryBudget {
 public:
  explicit MemoryBudget(int64_t limit_bytes, std::shared_ptr<MemoryBudget> parent = nullptr)
      : limit_(limit_bytes), parent_(std::move(parent)) {}
  MemoryBudget(const MemoryBudget&) = delete;
  MemoryBudget& operator=(const MemoryBudget&) = delete;
  ~MemoryBudget() {
    if (parent_) parent_->release(used_.load());
  }

  // Takes `bytes` from the budget for `what` ("the arena", "folded constant 'c'"), or
  // RESOURCE_EXHAUSTED naming it, the bytes asked and the budget, taking nothing.
  Status reserve(int64_t bytes, std::string_view what);
  void release(int64_t bytes) {
    used_.fetch_sub(bytes);
    if (parent_) parent_->release(bytes);
  }

  int64_t limit() const { return limit_; }
  int64_t used() const { return used_.load(); }

 private:
  Status reserve_here(int64_t bytes, std::string_view what);

  const int64_t limit_;
  std::atomic<int64_t> used_{0};
  std::shared_ptr<MemoryBudget> parent_;
};

// Physical memory of this machine in bytes (0 if it cannot be read).
int64_t physical_memory_bytes();
// "1.5 GiB", "512 B": sizes in messages.
std::string format_bytes(int64_t bytes);
// parse_byte_size and default_host_memory_budget: strider/options.h.

}  // namespace strider
