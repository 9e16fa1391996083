// The host as a queue (index 0): a command runs in the submitting thread, after blocking
// on each of its waits, so host access to memory is ordered like any other access.
//
// Threads: one thread submits (the session's, under its lock), but other queues' workers
// call wait() on host timepoints while it does (a worker command that reads what a host
// command wrote), so the completed count is atomic and the first error sits behind a
// mutex. A wait never blocks: a host command has completed when submit() returns, before
// any command that waits for it can have been submitted.
#pragma once

#include <atomic>
#include <functional>
#include <mutex>

#include "hal/queue.h"

namespace strider {

class HostQueue final : public Queue {
 public:
  // `queue_of` finds the queue a wait refers to.
  explicit HostQueue(std::function<Queue&(int)> queue_of) : queue_of_(std::move(queue_of)) {}
  int index() const override { return kHostQueue; }
  Timepoint next() const override { return {kHostQueue, completed_.load(std::memory_order_acquire) + 1}; }
  Timepoint submit(Command command) override;
  Status wait(uint64_t value) override;

 private:
  std::function<Queue&(int)> queue_of_;
  std::atomic<uint64_t> completed_{0};
  mutable std::mutex error_mutex_;
  Status first_error_;
};

}  // namespace strider
