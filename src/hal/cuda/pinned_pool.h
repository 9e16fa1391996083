// PinnedPool: pinned host memory for the outputs a cuda session hands back, so that a
// run()'s download is one DMA per output at the bus's speed, with no host copy.
//
// Why: bench/pinned_staging_probe (session 34, H100 machine) moved a 4.2-MiB download at
// 50 GB/s into pinned memory and at 17-21 GB/s through the pinned staging buffer (the
// threads' host copies and their wake-ups), and run() returns each output as a new tensor,
// so the caller's memory is the device's to choose. CudaDevice::download_all asks the pool
// for a block when it makes a tensor for an output of kMinBytes or more, and the tensor
// adopts it (Tensor::adopt): an owning tensor like any other, whose destruction gives the
// block back here.
//
// Ownership: each block handed out holds a reference to the pool (its HostBuffer's release
// does), so the pool outlives every tensor over its memory, the device's included. Given-
// back blocks are kept for reuse (a model's outputs have the same sizes every run; pinning
// costs ~1 ms a MiB) up to kMaxCachedBytes and freed beyond. Page-locked memory is the
// machine's to share: at most kMaxOutstandingBytes are out at once; past that, and where
// pinning fails, take() returns nothing and the caller uses pageable memory (staged).
// Thread safety: take() and the releases may run on any threads at once (tensors die where
// their owners drop them). The CUDA calls run with the pool's GPU current and restore the
// thread's own current device afterwards (a call on a thread with none set would make a
// context on GPU 0, which a session on cuda:1 must never touch). The plugin is never
// unloaded (hal/cuda_loader.cc), so a release's code outlives every session.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>

#include "strider/host_buffer.h"

namespace strider::cuda {

class PinnedPool : public std::enable_shared_from_this<PinnedPool> {
 public:
  static constexpr size_t kMinBytes = size_t(64) << 10;  // below: a DMA's fixed cost dominates either way
  static constexpr size_t kMaxCachedBytes = size_t(512) << 20;
  static constexpr size_t kMaxOutstandingBytes = size_t(4) << 30;

  static std::shared_ptr<PinnedPool> create(int ordinal) { return std::shared_ptr<PinnedPool>(new PinnedPool(ordinal)); }
  ~PinnedPool();
  PinnedPool(const PinnedPool&) = delete;
  PinnedPool& operator=(const PinnedPool&) = delete;

  // A pinned block of at least `bytes`, or an empty HostBuffer (no data) where the caller
  // should use pageable memory: below kMinBytes, past kMaxOutstandingBytes, or when the
  // driver cannot pin more.
  HostBuffer take(size_t bytes);

  // For tests: bytes handed out and not yet given back, and bytes kept for reuse.
  size_t outstanding_bytes() const;
  size_t cached_bytes() const;

 private:
  explicit PinnedPool(int ordinal) : ordinal_(ordinal) {}
  void give_back(std::byte* block, size_t size);
  HostBuffer hand_out(std::byte* block, size_t size);

  int ordinal_;
  mutable std::mutex mutex_;
  std::multimap<size_t, std::byte*> free_;  // by size
  size_t cached_ = 0, outstanding_ = 0;
};

}  // namespace strider::cuda
