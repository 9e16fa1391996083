// Stamps for a trace of one run (`strider bench --trace FILE`, trace_run in strider/tools.h).
//
// The executor wraps each command's work of a traced run in two stamps, taken from inside
// the work on the command's queue, so a stamp is the moment that queue reaches the point:
// on a device whose commands run their work as they execute (the CPU's worker queues, the
// host queue, sim) that is the host clock then; on a GPU, whose commands only enqueue, it
// is an event recorded on the stream, which the device timestamps when it gets there.
// All stamps of one clock share one time base, so commands of different queues line up.
//
// Threads: stamp() may be called from every queue's thread at once. read() only after the
// device synchronized (every stamped command completed).
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "hal/queue.h"
#include "strider/status.h"

namespace strider {

class TraceClock {
 public:
  virtual ~TraceClock() = default;
  // Stamp `id` (ids are dense from 0; each taken once) is now on `context`'s queue.
  virtual void stamp(const QueueContext& context, size_t id) = 0;
  // Stamps 0..count-1 in ms after the earliest of them (NaN for one never taken).
  virtual Result<std::vector<double>> read(size_t count) = 0;
};

// The host's steady clock: for devices whose work runs as it executes.
std::unique_ptr<TraceClock> make_host_trace_clock();

}  // namespace strider
