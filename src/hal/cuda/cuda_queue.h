// A CUDA queue: one non-blocking stream; each command's completion is an event, so a
// timepoint (queue, value) is the event recorded after that queue's value-th command.
// A wait on another queue is cudaStreamWaitEvent (the GPU waits, the host does not); the
// host waits with cudaEventSynchronize. Commands run their `work` in the submitting
// thread, which enqueues kernels on the stream and returns.
#pragma once

#include <cuda_runtime.h>

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "hal/queue.h"

namespace strider::cuda {

class CudaQueue final : public Queue {
 public:
  // `queue_of` finds other queues (to wait on their events).
  static Result<std::unique_ptr<CudaQueue>> create(int index, int ordinal, std::function<Queue&(int)> queue_of);
  ~CudaQueue() override;

  int index() const override { return index_; }
  Timepoint next() const override;
  Timepoint submit(Command command) override;
  Status wait(uint64_t value) override;
  // CUDA events around `work` on this stream.
  Result<double> time(const std::function<Status(const QueueContext&)>& work) override;
  Result<double> time_device_only(const std::function<Status(const QueueContext&)>& work) override;
  // A CUDA graph of what `work` enqueues on this stream, replayed with cudaGraphLaunch.
  Result<std::function<Status(const QueueContext&)>> capture(
      const std::function<Status(const QueueContext&)>& work) override;

  cudaStream_t stream() const { return stream_; }
  // The event that completes `value`, or nullptr when it is known complete.
  cudaEvent_t event_for(uint64_t value) const;

 private:
  CudaQueue(int index, int ordinal, std::function<Queue&(int)> queue_of)
      : index_(index), ordinal_(ordinal), queue_of_(std::move(queue_of)) {}
  void recycle_completed();

  int index_, ordinal_;
  std::function<Queue&(int)> queue_of_;
  cudaStream_t stream_ = nullptr;
  mutable std::mutex mutex_;
  std::map<uint64_t, cudaEvent_t> events_;  // not yet known complete, by value
  std::vector<cudaEvent_t> spare_events_;
  uint64_t submitted_ = 0, known_complete_ = 0;
  Status first_error_;
};

}  // namespace strider::cuda
