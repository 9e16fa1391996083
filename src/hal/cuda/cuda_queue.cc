#include "hal/cuda/cuda_queue.h"

#include <fmt/format.h>

#include "base/exception_guard.h"
#include "hal/cuda/copy.h"
#include "hal/cuda/cuda_check.h"

namespace strider::cuda {

Result<std::unique_ptr<CudaQueue>> CudaQueue::create(int index, int ordinal, std::function<Queue&(int)> queue_of) {
  std::unique_ptr<CudaQueue> q(new CudaQueue(index, ordinal, std::move(queue_of)));
  STRIDER_CUDA_RETURN(cudaSetDevice(ordinal), "queue");
  STRIDER_CUDA_RETURN(cudaStreamCreateWithFlags(&q->stream_, cudaStreamNonBlocking), "queue");
  return q;
}

CudaQueue::~CudaQueue() {
  cudaSetDevice(ordinal_);
  if (stream_) cudaStreamSynchronize(stream_);
  for (auto& [value, event] : events_) cudaEventDestroy(event);
  for (cudaEvent_t event : spare_events_) cudaEventDestroy(event);
  if (stream_) cudaStreamDestroy(stream_);
}

Timepoint CudaQueue::next() const {
  std::lock_guard lock(mutex_);
  return {index_, submitted_ + 1};
}

cudaEvent_t CudaQueue::event_for(uint64_t value) const {
  std::lock_guard lock(mutex_);
  auto it = events_.find(value);
  return it == events_.end() ? nullptr : it->second;
}

// Events of commands the GPU has finished go back to the spare pool.
void CudaQueue::recycle_completed() {
  while (!events_.empty() && cudaEventQuery(events_.begin()->second) == cudaSuccess) {
    known_complete_ = events_.begin()->first;
    spare_events_.push_back(events_.begin()->second);
    events_.erase(events_.begin());
  }
}

Timepoint CudaQueue::submit(Command command) {
  cudaSetDevice(ordinal_);
  Status status;
  for (const Timepoint& w : command.waits) {
    if (w.queue == kHostQueue) continue;  // host commands complete before submit returns
    cudaEvent_t event = static_cast<CudaQueue&>(queue_of_(w.queue)).event_for(w.value);
    if (event && status.is_ok()) status = cuda_status(cudaStreamWaitEvent(stream_, event, 0), "cudaStreamWaitEvent");
  }
  if (status.is_ok() && command.work) status = guard(command.label, [&] { return command.work(QueueContext{index_, stream_}); });
  std::lock_guard lock(mutex_);
  if (!status.is_ok() && first_error_.is_ok()) first_error_ = status.with_context(command.label);
  cudaEvent_t event = nullptr;
  if (!spare_events_.empty()) {
    event = spare_events_.back();
    spare_events_.pop_back();
  } else if (cudaEventCreateWithFlags(&event, cudaEventDisableTiming) != cudaSuccess) {
    event = nullptr;
  }
  if (event) cudaEventRecord(event, stream_);
  uint64_t value = ++submitted_;
  if (event) events_[value] = event;
  else if (first_error_.is_ok()) first_error_ = device_error(fmt::format("{}: no CUDA event for its timepoint", command.label));
  if (events_.size() > 64) recycle_completed();
  return {index_, value};
}

Status CudaQueue::wait(uint64_t value) {
  cudaEvent_t event = nullptr;
  {
    std::lock_guard lock(mutex_);
    if (value > submitted_) return internal_error("wait for a timepoint never submitted");
    auto it = events_.find(value);
    if (it != events_.end()) event = it->second;
  }
  if (event) {
    cudaSetDevice(ordinal_);
    Status synced = cuda_status(cudaEventSynchronize(event), "cudaEventSynchronize", "queue wait");
    std::lock_guard lock(mutex_);
    if (!synced.is_ok() && first_error_.is_ok()) first_error_ = synced;
    recycle_completed();
  }
  std::lock_guard lock(mutex_);
  return first_error_;
}

}  // namespace strider::cuda

namespace strider::cuda {

Result<std::function<Status(const QueueContext&)>> CudaQueue::capture(
    const std::function<Status(const QueueContext&)>& work) {
  cudaSetDevice(ordinal_);
  STRIDER_CUDA_RETURN(cudaStreamSynchronize(stream_), "capture");
  STRIDER_CUDA_RETURN(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), "capture");
  Status recorded = work(QueueContext{index_, stream_});
  cudaGraph_t graph = nullptr;
  cudaError_t ended = cudaStreamEndCapture(stream_, &graph);
  if (!recorded.is_ok() || ended != cudaSuccess) {
    if (graph) cudaGraphDestroy(graph);
    cudaGetLastError();  // a failed capture leaves a sticky launch error behind
    return recorded.is_ok() ? cuda_status(ended, "cudaStreamEndCapture", "capture") : recorded;
  }
  cudaGraphExec_t exec = nullptr;
  cudaError_t instantiated = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  STRIDER_CUDA_RETURN(instantiated, "capture");
  auto owned = std::shared_ptr<CUgraphExec_st>(exec, [](cudaGraphExec_t e) { cudaGraphExecDestroy(e); });
  return std::function<Status(const QueueContext&)>([owned](const QueueContext& context) {
    return cuda_status(cudaGraphLaunch(owned.get(), static_cast<cudaStream_t>(context.native_stream)),
                       "cudaGraphLaunch");
  });
}

}  // namespace strider::cuda

namespace strider::cuda {

Result<double> CudaQueue::time_device_only(const std::function<Status(const QueueContext&)>& work) {
  cudaSetDevice(ordinal_);
  // 0.5 ms of device-side waiting covers the host's enqueueing of one step (a library
  // call or a graph launch); it runs before the start event, so it is not counted.
  STRIDER_RETURN_IF_ERROR(launch_delay(stream_, 500));
  return time(work);
}

Result<double> CudaQueue::time(const std::function<Status(const QueueContext&)>& work) {
  cudaSetDevice(ordinal_);
  cudaEvent_t start = nullptr, stop = nullptr;
  STRIDER_CUDA_RETURN(cudaEventCreate(&start), "timing");
  STRIDER_CUDA_RETURN(cudaEventCreate(&stop), "timing");
  auto destroy = [&] {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
  };
  cudaEventRecord(start, stream_);
  Status status = work(QueueContext{index_, stream_});
  cudaEventRecord(stop, stream_);
  cudaError_t synced = cudaEventSynchronize(stop);
  float ms = 0;
  if (status.is_ok() && synced == cudaSuccess) cudaEventElapsedTime(&ms, start, stop);
  destroy();
  STRIDER_RETURN_IF_ERROR(status);
  STRIDER_CUDA_RETURN(synced, "timing");
  return double(ms);
}

}  // namespace strider::cuda
