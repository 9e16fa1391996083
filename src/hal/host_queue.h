// The host as a queue (index 0): a command runs in the submitting thread, after blocking
// on each of its waits, so host access to memory is ordered like any other access.
#pragma once

#include <functional>

#include "hal/queue.h"

namespace strider {

class HostQueue final : public Queue {
 public:
  // `queue_of` finds the queue a wait refers to.
  explicit HostQueue(std::function<Queue&(int)> queue_of) : queue_of_(std::move(queue_of)) {}
  int index() const override { return kHostQueue; }
  Timepoint next() const override { return {kHostQueue, completed_ + 1}; }
  Timepoint submit(Command command) override;
  Status wait(uint64_t value) override;

 private:
  std::function<Queue&(int)> queue_of_;
  uint64_t completed_ = 0;
  Status first_error_;
};

}  // namespace strider
