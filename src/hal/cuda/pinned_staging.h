// PinnedStaging: how CudaDevice moves a run's inputs and outputs between the caller's
// pageable host memory and the GPU.
//
// Why: on the H200 machine (bench/cuda_transfer_probe) pageable memory crossed at 5-12 GB/s
// and pinned memory at 53 GB/s, while one thread copied host memory at only 5-10 GB/s for
// a few MiB (so staging through pinned memory on one thread gained nothing). Here a
// transfer is cut into parts; threads of the device's own copy the parts between the
// caller's memory and one pinned buffer at once, and each part's DMA starts as soon as its
// bytes are there (an upload) or its host copy waits for its own DMA (a download), so the
// host copies run side by side and overlap the bus.
//
// Part size: a download ends with the host copy of its last part, after the last DMA, so
// that copy is the transfer's tail: parts of 1 MiB left ~0.1-0.2 ms of it (one thread's
// copy speed) on every run's output. Parts are sized to give each thread about two
// (64 KiB to 1 MiB): the tail shrinks with the part, while a part still costs one DMA call.
// STRIDER_CUDA_STAGING_PART_KB fixes the size (for measuring).
//
// Several copies go as one transfer (a run's inputs, or its outputs): their parts share
// the threads, and the caller waits once, not once per tensor.
//
// Ownership and ordering: the pinned buffer is the device's, grown to the largest transfer
// up to kMaxStagedBytes (larger ones go as pageable copies), and reused only after the
// transfer that used it has completed: every call waits for its copies before returning.
// One transfer at a time (the caller serializes them: CudaDevice's transfer mutex). The
// threads sleep when idle (no spinning), are made on the first transfer that uses them,
// and only as many as a transfer has parts are woken; each makes its GPU (`ordinal`) its
// current device first: a CUDA call on a thread whose current device was never set makes
// a context on GPU 0, which a session on cuda:1 must never touch. The device's threads poll
// for kDefaultSpinUs before sleeping, so that the transfers of a run, and of runs back to
// back, find them awake: a sleeping thread took ~300 us to wake on these VMs, and polling
// took 14-18% off run() of C2f and MobileNetV2 at batch 32 in bf16 on an H100 (session
// 36); STRIDER_CUDA_STAGING_SPIN_US sets it, 0 sleeps at once. This trades CPU time for
// latency, as ONNX Runtime's spinning intra-op threads do by default.
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <semaphore>
#include <span>
#include <thread>
#include <vector>

#include "strider/status.h"

namespace strider::cuda {

// One cudaMemcpyAsync on `stream` and a wait for it (pageable memory: the driver stages it).
Status copy_and_wait(void* target, const void* source, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream);

// One copy of a transfer: `bytes` from `source` to `target` (host to device for an upload,
// device to host for a download).
struct HostDeviceCopy {
  void* target;
  const void* source;
  size_t bytes;
};

class PinnedStaging {
 public:
  static constexpr size_t kMinPartBytes = size_t(64) << 10;
  static constexpr size_t kMaxPartBytes = size_t(1) << 20;
  static constexpr size_t kMaxStagedBytes = size_t(256) << 20;
  // How long the device's idle threads poll before sleeping, unless set.
  static constexpr int kDefaultSpinUs = 300;

  // `ordinal`: the GPU of the streams it is given. `threads`: host copies at once (the
  // calling thread is one of them); 0 picks half the machine's cores, at most 8.
  // `part_bytes`: 0 sizes parts per transfer (above), else every part is that size.
  // `spin_us`: how long an idle thread polls for the next job (and the caller for the
  // threads to finish) before sleeping; 0 sleeps at once.
  explicit PinnedStaging(int ordinal, int threads = 0, size_t part_bytes = 0, int spin_us = 0);
  ~PinnedStaging();
  PinnedStaging(const PinnedStaging&) = delete;
  PinnedStaging& operator=(const PinnedStaging&) = delete;

  // Host to device on `stream`, every copy, and waits for them.
  Status upload(std::span<const HostDeviceCopy> copies, cudaStream_t stream);
  // Device to host on `stream`, every copy, and waits for them.
  Status download(std::span<const HostDeviceCopy> copies, cudaStream_t stream);
  Status upload(void* target, const void* source, size_t bytes, cudaStream_t stream) {
    return upload(std::span<const HostDeviceCopy>(std::array{HostDeviceCopy{target, source, bytes}}), stream);
  }
  Status download(void* target, const void* source, size_t bytes, cudaStream_t stream) {
    return download(std::span<const HostDeviceCopy>(std::array{HostDeviceCopy{target, source, bytes}}), stream);
  }

  // The part size a transfer of `bytes` is cut into.
  size_t part_bytes_for(size_t bytes) const;

  // Runs part(i) for i in [0, parts) on min(parts, threads) threads: the caller takes part 0
  // and every that-many-th after. What upload and download do with their parts; public for
  // the tests of the threads' hand-over (it needs no GPU).
  void parallel(size_t parts, const std::function<void(size_t)>& part);

 private:
  // A piece of one copy, staged at `pinned_at` of the pinned buffer.
  struct Part {
    size_t copy, at, bytes, pinned_at;
  };
  std::vector<Part> parts_of(std::span<const HostDeviceCopy> copies, size_t* staged_bytes) const;
  Status reserve(size_t bytes, size_t parts);
  Status one_by_one(std::span<const HostDeviceCopy> copies, cudaMemcpyKind kind, cudaStream_t stream);
  struct Worker;
  void worker_loop(Worker& self, size_t index);
  bool spin_until(const std::function<bool()>& done) const;

  int ordinal_;
  int threads_;
  size_t fixed_part_bytes_;
  int spin_us_;
  std::byte* pinned_ = nullptr;
  size_t pinned_bytes_ = 0;
  std::vector<cudaEvent_t> part_done_;  // one per part of the largest transfer so far

  // A job: its fields and generation_'s step are written under mutex_, where workers read
  // them; busy_ counts the job's workers still copying (the caller polls it, then waits
  // for finished_ under mutex_).
  struct Worker {
    std::counting_semaphore<> go{0};  // counting: the destructor releases one that may hold a token already
    std::atomic<bool> asleep{false};  // set by the worker before it sleeps; taken by the one who wakes it
    std::thread thread;
  };
  std::vector<std::unique_ptr<Worker>> workers_;  // workers_[i] takes index i + 1
  const std::function<void(size_t)>* job_ = nullptr;
  size_t job_parts_ = 0, job_stride_ = 1;
  bool stopping_ = false;
  std::atomic<uint64_t> generation_{0};
  std::mutex mutex_;
  std::condition_variable finished_;
  std::atomic<int> busy_{0};
};

}  // namespace strider::cuda
