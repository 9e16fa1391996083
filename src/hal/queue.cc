#include "hal/queue.h"

#include <chrono>

namespace strider {

Result<double> Queue::time(const std::function<Status(const QueueContext&)>& work) {
  STRIDER_RETURN_IF_ERROR(wait(next().value - 1));
  auto start = std::chrono::steady_clock::now();
  Timepoint done = submit(Command{"timed", work, {}});
  STRIDER_RETURN_IF_ERROR(wait(done.value));
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace strider
