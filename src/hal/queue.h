// Queues and timepoints: how work is ordered (docs/MEMORY_MODEL.md rules 2, 4 and 5).
//
// Every queue has a counter that grows by one with each command it completes; a Timepoint
// (queue, value) is the moment that queue has completed `value` commands. A command lists
// the timepoints it must wait for; between commands of one queue there is no wait, since a
// queue runs its commands in submission order. The host is queue 0: its commands run in
// the calling thread at submit, after blocking on their waits; device queues are 1..N.
//
// Threading: one thread submits to a queue (the session's executor); any thread may wait.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "strider/status.h"

namespace strider {

inline constexpr int kHostQueue = 0;

struct Timepoint {
  int queue = kHostQueue;
  uint64_t value = 0;  // 0: before the queue's first command (always reached)
};

// What a command's work may use of the queue that runs it.
struct QueueContext {
  int queue = kHostQueue;
  void* native_stream = nullptr;  // a device queue's stream (cudaStream_t on CUDA), else null
};

struct Command {
  std::string label;                                 // "Conv '/m.0/cv1/conv/Conv'", for reports
  std::function<Status(const QueueContext&)> work;   // runs once every wait is reached
  std::vector<Timepoint> waits;
};

class Queue {
 public:
  virtual ~Queue() = default;
  virtual int index() const = 0;
  // The timepoint the next submitted command will complete.
  virtual Timepoint next() const = 0;
  // Enqueues `command` and returns its timepoint; does not wait for it (host: runs it).
  virtual Timepoint submit(Command command) = 0;
  // Blocks until this queue has reached `value`. Returns the first error any of its
  // commands up to there returned (a failed command still counts as completed).
  virtual Status wait(uint64_t value) = 0;

  // Records what `work` enqueues, without running it, as one replayable unit (a CUDA
  // graph; on a CPU worker queue, the work itself as one command), and returns the work
  // that replays it. UNSUPPORTED where the queue cannot.
  virtual Result<std::function<Status(const QueueContext&)>> capture(
      const std::function<Status(const QueueContext&)>& work) {
    return unsupported("this queue cannot capture work");
  }

  // Runs `work` on this queue after everything submitted so far and returns how long the
  // queue spent on it, in milliseconds: CUDA events on a GPU, the host clock elsewhere.
  virtual Result<double> time(const std::function<Status(const QueueContext&)>& work);
  // As time(), but the device's time alone: on a GPU the queue is first held busy long
  // enough that the host has enqueued all of `work` before the device starts it, so a
  // library's host-side cost per call (cuDNN's was ~0.1 ms) stays out. For per-step
  // profiles; a run's device time (time()) keeps the host's launch gaps, as a framework's
  // CUDA-event timing of a call does.
  virtual Result<double> time_device_only(const std::function<Status(const QueueContext&)>& work) { return time(work); }
};

}  // namespace strider
