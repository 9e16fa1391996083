#include "hal/host_queue.h"
#include "base/exception_guard.h"

#include <fmt/format.h>

namespace strider {

Timepoint HostQueue::submit(Command command) {
  Status status;
  for (const Timepoint& w : command.waits) {
    Status waited = queue_of_(w.queue).wait(w.value);
    if (!waited.is_ok() && status.is_ok()) status = waited;
  }
  if (status.is_ok() && command.work) {
    auto work = [&] { return guard(command.label, [&] { return command.work(QueueContext{index_, nullptr}); }); };
    status = around_ ? around_(work) : work();
  }
  if (!status.is_ok()) {
    std::lock_guard lock(error_mutex_);
    if (first_error_.is_ok()) first_error_ = status;
  }
  return {index_, completed_.fetch_add(1, std::memory_order_acq_rel) + 1};
}

Status HostQueue::wait(uint64_t value) {
  const uint64_t completed = completed_.load(std::memory_order_acquire);
  if (value > completed) return internal_error(fmt::format("wait for timepoint {} of {} on inline queue {}", value, completed, index_));
  std::lock_guard lock(error_mutex_);
  return first_error_;
}

}  // namespace strider
