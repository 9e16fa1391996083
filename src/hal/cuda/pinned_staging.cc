#include "hal/cuda/pinned_staging.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "hal/cuda/cuda_check.h"

namespace strider::cuda {
namespace {

int default_threads() {
  const int cores = int(std::thread::hardware_concurrency());
  return std::clamp(cores / 2, 1, 8);
}

// A spinning thread's pause between polls (it yields the core's pipeline to its sibling).
#if defined(__x86_64__) || defined(__i386__)
inline void cpu_relax() { __builtin_ia32_pause(); }
#else
inline void cpu_relax() { std::this_thread::yield(); }
#endif

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

// Each copy starts on a 256-byte boundary of the pinned buffer, as DMA prefers.
constexpr size_t kCopyAlignment = 256;

// Waits for the stream, then reports the parts' first error. Waited for even after an
// error: the buffer is not reused while a copy may still read or write it.
Status wait_for_parts(const std::vector<cudaError_t>& errors, cudaStream_t stream, const char* what) {
  const cudaError_t synced = cudaStreamSynchronize(stream);
  for (cudaError_t e : errors) STRIDER_CUDA_RETURN(e, what);
  STRIDER_CUDA_RETURN(synced, what);
  return Status::ok();
}

size_t total_bytes(std::span<const HostDeviceCopy> copies) {
  size_t total = 0;
  for (const HostDeviceCopy& c : copies) total += round_up(c.bytes, kCopyAlignment);
  return total;
}

}  // namespace

Status copy_and_wait(void* target, const void* source, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream) {
  const char* what = kind == cudaMemcpyHostToDevice ? "upload" : "download";
  STRIDER_CUDA_RETURN(cudaMemcpyAsync(target, source, bytes, kind, stream), what);
  STRIDER_CUDA_RETURN(cudaStreamSynchronize(stream), what);
  return Status::ok();
}

PinnedStaging::PinnedStaging(int ordinal, int threads, size_t part_bytes, int spin_us)
    : ordinal_(ordinal),
      threads_(threads > 0 ? threads : default_threads()),
      fixed_part_bytes_(part_bytes),
      spin_us_(std::max(0, spin_us)) {}

PinnedStaging::~PinnedStaging() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    generation_.fetch_add(1);
  }
  for (auto& w : workers_) w->go.release();  // a spinning worker sees the generation; a second token is harmless
  for (auto& w : workers_) w->thread.join();
  for (cudaEvent_t e : part_done_) cudaEventDestroy(e);
  if (pinned_) cudaFreeHost(pinned_);
}

size_t PinnedStaging::part_bytes_for(size_t bytes) const {
  if (fixed_part_bytes_ > 0) return fixed_part_bytes_;
  const size_t two_each = round_up((bytes + 2 * size_t(threads_) - 1) / (2 * size_t(threads_)), kMinPartBytes);
  return std::clamp(two_each, kMinPartBytes, kMaxPartBytes);
}

std::vector<PinnedStaging::Part> PinnedStaging::parts_of(std::span<const HostDeviceCopy> copies,
                                                         size_t* staged_bytes) const {
  const size_t part = part_bytes_for(total_bytes(copies));
  std::vector<Part> parts;
  size_t pinned_at = 0;
  for (size_t c = 0; c < copies.size(); ++c) {
    for (size_t at = 0; at < copies[c].bytes; at += part)
      parts.push_back({c, at, std::min(part, copies[c].bytes - at), pinned_at + at});
    pinned_at += round_up(copies[c].bytes, kCopyAlignment);
  }
  *staged_bytes = pinned_at;
  return parts;
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

// Copies too large to stage together: each on its own, staged, or as a pageable copy when
// it alone is larger than the most the buffer grows to.
Status PinnedStaging::one_by_one(std::span<const HostDeviceCopy> copies, cudaMemcpyKind kind, cudaStream_t stream) {
  for (const HostDeviceCopy& c : copies) {
    const std::span<const HostDeviceCopy> one(&c, 1);
    STRIDER_RETURN_IF_ERROR(c.bytes > kMaxStagedBytes ? copy_and_wait(c.target, c.source, c.bytes, kind, stream)
                            : kind == cudaMemcpyHostToDevice ? upload(one, stream)
                                                             : download(one, stream));
  }
  return Status::ok();
}

Status PinnedStaging::upload(std::span<const HostDeviceCopy> copies, cudaStream_t stream) {
  if (total_bytes(copies) > kMaxStagedBytes) return one_by_one(copies, cudaMemcpyHostToDevice, stream);
  size_t staged = 0;
  const std::vector<Part> parts = parts_of(copies, &staged);
  if (parts.empty()) return Status::ok();
  STRIDER_RETURN_IF_ERROR(reserve(staged, 0));
  std::vector<cudaError_t> errors(parts.size(), cudaSuccess);
  const std::function<void(size_t)> part = [&](size_t i) {
    const Part& p = parts[i];
    const HostDeviceCopy& c = copies[p.copy];
    std::memcpy(pinned_ + p.pinned_at, static_cast<const std::byte*>(c.source) + p.at, p.bytes);
    errors[i] = cudaMemcpyAsync(static_cast<std::byte*>(c.target) + p.at, pinned_ + p.pinned_at, p.bytes,
                                cudaMemcpyHostToDevice, stream);
  };
  parallel(parts.size(), part);
  return wait_for_parts(errors, stream, "upload");
}

Status PinnedStaging::download(std::span<const HostDeviceCopy> copies, cudaStream_t stream) {
  if (total_bytes(copies) > kMaxStagedBytes) return one_by_one(copies, cudaMemcpyDeviceToHost, stream);
  size_t staged = 0;
  const std::vector<Part> parts = parts_of(copies, &staged);
  if (parts.empty()) return Status::ok();
  STRIDER_RETURN_IF_ERROR(reserve(staged, parts.size()));
  std::vector<cudaError_t> errors(parts.size(), cudaSuccess);
  for (size_t i = 0; i < parts.size(); ++i) {  // every part's DMA queued first, each with its event
    const Part& p = parts[i];
    errors[i] = cudaMemcpyAsync(pinned_ + p.pinned_at, static_cast<const std::byte*>(copies[p.copy].source) + p.at,
                                p.bytes, cudaMemcpyDeviceToHost, stream);
    if (errors[i] == cudaSuccess) errors[i] = cudaEventRecord(part_done_[i], stream);
  }
  const std::function<void(size_t)> part = [&](size_t i) {
    if (errors[i] != cudaSuccess) return;
    const Part& p = parts[i];
    errors[i] = cudaEventSynchronize(part_done_[i]);
    if (errors[i] == cudaSuccess)
      std::memcpy(static_cast<std::byte*>(copies[p.copy].target) + p.at, pinned_ + p.pinned_at, p.bytes);
  };
  parallel(parts.size(), part);
  return wait_for_parts(errors, stream, "download");
}

void PinnedStaging::parallel(size_t parts, const std::function<void(size_t)>& part) {
  const size_t active = std::min(parts, size_t(threads_));
  if (active <= 1) {
    for (size_t i = 0; i < parts; ++i) part(i);
    return;
  }
  {
    std::lock_guard lock(mutex_);
    while (workers_.size() < active - 1) {
      Worker* worker = workers_.emplace_back(std::make_unique<Worker>()).get();
      const size_t index = workers_.size();
      worker->thread = std::thread([this, worker, index] { worker_loop(*worker, index); });
    }
    job_ = &part;
    job_parts_ = parts;
    job_stride_ = active;
    busy_.store(int(active) - 1);
    generation_.fetch_add(1);
  }
  for (size_t w = 0; w + 1 < active; ++w)  // a spinning worker sees the generation; a sleeping one is woken
    if (workers_[w]->asleep.exchange(false)) workers_[w]->go.release();
  for (size_t i = 0; i < parts; i += active) part(i);
  spin_until([this] { return busy_.load() == 0; });
  std::unique_lock lock(mutex_);
  finished_.wait(lock, [this] { return busy_.load() == 0; });
  job_ = nullptr;
}

// Up to spin_us_ of polling `done` (a thread that sleeps takes tens of microseconds to
// wake on a virtual machine, against a part's copy of about as long); whether it became true.
bool PinnedStaging::spin_until(const std::function<bool()>& done) const {
  if (done()) return true;
  if (spin_us_ <= 0) return false;
  const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(spin_us_);
  do {
    for (int i = 0; i < 64; ++i) {
      if (done()) return true;
      cpu_relax();
    }
  } while (std::chrono::steady_clock::now() < until);
  return done();
}

// Worker `index` takes parts index, index + stride, ... of each job after the generation it
// saw last, when it is one of the job's threads. It polls for the next job for spin_us_,
// then sleeps: it marks itself asleep and checks once more; a poster that finds it marked
// releases its semaphore (so a job posted between the mark and the sleep is not missed,
// and a release it did not wait for is consumed). A poster may find it marked for its
// next sleep after it ran the job by polling: that wake-up sees no new generation.
void PinnedStaging::worker_loop(Worker& self, size_t index) {
  const cudaError_t on_device = cudaSetDevice(ordinal_);  // checked by the parts' own calls
  (void)on_device;
  uint64_t seen = 0;
  for (;;) {
    if (!spin_until([&] { return generation_.load() != seen; })) {
      self.asleep.store(true);
      if (generation_.load() == seen || !self.asleep.exchange(false)) self.go.acquire();
    }
    const std::function<void(size_t)>* job;
    size_t parts, stride;
    {
      std::lock_guard lock(mutex_);
      if (stopping_) return;
      // A wake-up for the job this thread already ran: its poster found it asleep again
      // after it had seen that job by polling (late, on a busy machine). Not run twice.
      if (generation_.load() == seen) continue;
      seen = generation_.load();
      job = job_;
      parts = job_parts_;
      stride = job_stride_;
    }
    if (index >= stride || job == nullptr) continue;  // not one of this job's threads
    for (size_t i = index; i < parts; i += stride) (*job)(i);
    if (busy_.fetch_sub(1) == 1) {
      std::lock_guard lock(mutex_);  // the caller checks busy_ under it: no lost wake-up
      finished_.notify_one();
    }
  }
}

}  // namespace strider::cuda
