// PinnedStaging: how CudaDevice moves a run's inputs and outputs between the caller's
// pageable host memory and the GPU.
//
// Why: on the H200 machine (bench/cuda_transfer_probe) pageable memory crossed at 5-12 GB/s
// and pinned memory at 53 GB/s, while one thread copied host memory at only 5-10 GB/s for
// a few MiB (so staging through pinned memory on one thread gained nothing). Here a
// transfer is cut into parts of about 1 MiB; threads of the device's own copy the parts
// between the caller's memory and one pinned buffer at once, and each part's DMA starts as
// soon as its bytes are there (an upload) or its host copy waits for its own DMA (a
// download), so the host copies run side by side and overlap the bus.
//
// Ownership and ordering: the pinned buffer is the device's, grown to the largest transfer
// up to kMaxStagedBytes (larger ones go as pageable copies), and reused only after the
// transfer that used it has completed: every call waits for its copies before returning.
// One transfer at a time (the caller serializes them: CudaDevice's transfer mutex). The
// threads sleep when idle (no spinning) and are made on the first transfer that uses them;
// each makes its GPU (`ordinal`) its current device first: a CUDA call on a thread whose
// current device was never set makes a context on GPU 0, which a session on cuda:1 must
// never touch.
#pragma once

#include <cuda_runtime.h>

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "strider/status.h"

namespace strider::cuda {

// One cudaMemcpyAsync on `stream` and a wait for it (pageable memory: the driver stages it).
Status copy_and_wait(void* target, const void* source, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream);

class PinnedStaging {
 public:
  static constexpr size_t kPartBytes = size_t(1) << 20;
  static constexpr size_t kMaxStagedBytes = size_t(256) << 20;

  // `ordinal`: the GPU of the streams it is given. `threads`: host copies at once (the
  // calling thread is one of them); 0 picks half the machine's cores, at most 8.
  explicit PinnedStaging(int ordinal, int threads = 0);
  ~PinnedStaging();
  PinnedStaging(const PinnedStaging&) = delete;
  PinnedStaging& operator=(const PinnedStaging&) = delete;

  // Copies `bytes` from host `source` to device `target` on `stream`, and waits for it.
  Status upload(void* target, const void* source, size_t bytes, cudaStream_t stream);
  // Copies `bytes` from device `source` to host `target` on `stream`, and waits for it.
  Status download(void* target, const void* source, size_t bytes, cudaStream_t stream);

 private:
  Status reserve(size_t bytes, size_t parts);
  // Runs part(i) for i in [0, parts): the caller takes part 0 and every `threads_`-th after.
  void parallel(size_t parts, const std::function<void(size_t)>& part);
  void worker_loop(int index, uint64_t seen);

  int ordinal_;
  int threads_;
  std::byte* pinned_ = nullptr;
  size_t pinned_bytes_ = 0;
  std::vector<cudaEvent_t> part_done_;  // one per part of the largest transfer so far

  std::mutex mutex_;
  std::condition_variable start_, finished_;
  std::vector<std::thread> workers_;
  const std::function<void(size_t)>* job_ = nullptr;  // under mutex_
  size_t job_parts_ = 0;
  uint64_t generation_ = 0;
  int busy_ = 0;
  bool stopping_ = false;
};

}  // namespace strider::cuda
