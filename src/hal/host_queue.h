// The host as a queue (index 0): a command runs in the submitting thread, after blocking
// on each of its waits, so host access to memory is ordered like any other access.
//
// The same class serves as an inline device queue (index > 0): a CPU session of one
// thread and one queue runs its steps on the caller's thread too (hal/cpu/cpu_device.h
// says why), each command's work inside `around` (the CPU's core lease).
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
  // Runs a command's work (the argument) and returns its status; may do more around it.
  using Around = std::function<Status(const std::function<Status()>&)>;
  // `queue_of` finds the queue a wait refers to.
  explicit HostQueue(std::function<Queue&(int)> queue_of, int index = kHostQueue, Around around = {})
      : queue_of_(std::move(queue_of)), index_(index), around_(std::move(around)) {}
  int index() const override { return index_; }
  Timepoint next() const override { return {index_, completed_.load(std::memory_order_acquire) + 1}; }
  Timepoint submit(Command command) override;
  Status wait(uint64_t value) override;
  // Work submitted here runs at once, so capturing it is keeping it (as a CPU worker does).
  Result<std::function<Status(const QueueContext&)>> capture(
      const std::function<Status(const QueueContext&)>& work) override {
    return work;
  }

 private:
  std::function<Queue&(int)> queue_of_;
  int index_;
  Around around_;
  std::atomic<uint64_t> completed_{0};
  mutable std::mutex error_mutex_;
  Status first_error_;
};

}  // namespace strider
