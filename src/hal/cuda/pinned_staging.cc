#include "hal/cuda/pinned_staging.h"

#include <algorithm>
#include <cstring>

#include "hal/cuda/cuda_check.h"

namespace strider::cuda {
namespace {

int default_threads() {
  const int cores = int(std::thread::hardware_concurrency());
  return std::clamp(cores / 2, 1, 8);
}

size_t parts_of(size_t bytes) { return (bytes + PinnedStaging::kPartBytes - 1) / PinnedStaging::kPartBytes; }

// Waits for the stream, then reports the parts' first error. Waited for even after an
// error: the buffer is not reused while a copy may still read or write it.
Status wait_for_parts(const std::vector<cudaError_t>& errors, cudaStream_t stream, const char* what) {
  const cudaError_t synced = cudaStreamSynchronize(stream);
  for (cudaError_t e : errors) STRIDER_CUDA_RETURN(e, what);
  STRIDER_CUDA_RETURN(synced, what);
  return Status::ok();
}

}  // namespace

Status copy_and_wait(void* target, const void* source, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream) {
  const char* what = kind == cudaMemcpyHostToDevice ? "upload" : "download";
  STRIDER_CUDA_RETURN(cudaMemcpyAsync(target, source, bytes, kind, stream), what);
  STRIDER_CUDA_RETURN(cudaStreamSynchronize(stream), what);
  return Status::ok();
}

PinnedStaging::PinnedStaging(int ordinal, int threads)
    : ordinal_(ordinal), threads_(threads > 0 ? threads : default_threads()) {}

PinnedStaging::~PinnedStaging() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  start_.notify_all();
  for (std::thread& t : workers_) t.join();
  for (cudaEvent_t e : part_done_) cudaEventDestroy(e);
  if (pinned_) cudaFreeHost(pinned_);
}

Status PinnedStaging::reserve(size_t bytes, size_t parts) {
  if (pinned_bytes_ < bytes) {
    if (pinned_) cudaFreeHost(pinned_);
    pinned_ = nullptr;
    pinned_bytes_ = 0;
    void* memory = nullptr;
    STRIDER_CUDA_RETURN(cudaHostAlloc(&memory, bytes, cudaHostAllocDefault), "pinned staging buffer");
    pinned_ = static_cast<std::byte*>(memory);
    pinned_bytes_ = bytes;
  }
  while (part_done_.size() < parts) {
    cudaEvent_t e = nullptr;
    STRIDER_CUDA_RETURN(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "pinned staging event");
    part_done_.push_back(e);
  }
  return Status::ok();
}

Status PinnedStaging::upload(void* target, const void* source, size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return Status::ok();
  if (bytes > kMaxStagedBytes) return copy_and_wait(target, source, bytes, cudaMemcpyHostToDevice, stream);
  const size_t parts = parts_of(bytes);
  STRIDER_RETURN_IF_ERROR(reserve(bytes, parts));
  std::vector<cudaError_t> errors(parts, cudaSuccess);
  const std::function<void(size_t)> part = [&](size_t i) {
    const size_t at = i * kPartBytes, n = std::min(kPartBytes, bytes - at);
    std::memcpy(pinned_ + at, static_cast<const std::byte*>(source) + at, n);
    errors[i] = cudaMemcpyAsync(static_cast<std::byte*>(target) + at, pinned_ + at, n, cudaMemcpyHostToDevice, stream);
  };
  parallel(parts, part);
  return wait_for_parts(errors, stream, "upload");
}

Status PinnedStaging::download(void* target, const void* source, size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return Status::ok();
  if (bytes > kMaxStagedBytes) return copy_and_wait(target, source, bytes, cudaMemcpyDeviceToHost, stream);
  const size_t parts = parts_of(bytes);
  STRIDER_RETURN_IF_ERROR(reserve(bytes, parts));
  std::vector<cudaError_t> errors(parts, cudaSuccess);
  for (size_t i = 0; i < parts; ++i) {  // every part's DMA queued first, each with its event
    const size_t at = i * kPartBytes, n = std::min(kPartBytes, bytes - at);
    errors[i] = cudaMemcpyAsync(pinned_ + at, static_cast<const std::byte*>(source) + at, n, cudaMemcpyDeviceToHost, stream);
    if (errors[i] == cudaSuccess) errors[i] = cudaEventRecord(part_done_[i], stream);
  }
  const std::function<void(size_t)> part = [&](size_t i) {
    if (errors[i] != cudaSuccess) return;
    const size_t at = i * kPartBytes, n = std::min(kPartBytes, bytes - at);
    errors[i] = cudaEventSynchronize(part_done_[i]);
    if (errors[i] == cudaSuccess) std::memcpy(static_cast<std::byte*>(target) + at, pinned_ + at, n);
  };
  parallel(parts, part);
  return wait_for_parts(errors, stream, "download");
}

void PinnedStaging::parallel(size_t parts, const std::function<void(size_t)>& part) {
  const size_t stride = size_t(threads_);
  if (parts == 1 || threads_ == 1) {
    for (size_t i = 0; i < parts; ++i) part(i);
    return;
  }
  {
    std::lock_guard lock(mutex_);
    while (int(workers_.size()) < threads_ - 1) {
      const int index = int(workers_.size()) + 1;
      workers_.emplace_back([this, index, seen = generation_] { worker_loop(index, seen); });
    }
    job_ = &part;
    job_parts_ = parts;
    busy_ = threads_ - 1;
    ++generation_;
  }
  start_.notify_all();
  for (size_t i = 0; i < parts; i += stride) part(i);
  std::unique_lock lock(mutex_);
  finished_.wait(lock, [this] { return busy_ == 0; });
  job_ = nullptr;
}

// Worker `index` takes parts index, index + threads_, ... of each job after generation
// `seen`. A job is posted only after every worker finished the last one, so none is missed.
void PinnedStaging::worker_loop(int index, uint64_t seen) {
  const cudaError_t on_device = cudaSetDevice(ordinal_);  // checked by the parts' own calls
  (void)on_device;
  std::unique_lock lock(mutex_);
  for (;;) {
    start_.wait(lock, [&] { return stopping_ || generation_ != seen; });
    if (stopping_) return;
    seen = generation_;
    const std::function<void(size_t)>* job = job_;
    const size_t parts = job_parts_;
    lock.unlock();
    for (size_t i = size_t(index); i < parts; i += size_t(threads_)) (*job)(i);
    lock.lock();
    if (--busy_ == 0) finished_.notify_one();
  }
}

}  // namespace strider::cuda
