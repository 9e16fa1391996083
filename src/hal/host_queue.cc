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
  if (status.is_ok() && command.work) status = guard(command.label, [&] { return command.work(QueueContext{kHostQueue, nullptr}); });
  if (!status.is_ok() && first_error_.is_ok()) first_error_ = status;
  return {kHostQueue, ++completed_};
}

Status HostQueue::wait(uint64_t value) {
  if (value > completed_) return internal_error(fmt::format("wait for host timepoint {} of {}", value, completed_));
  return first_error_;
}

}  // namespace strider
