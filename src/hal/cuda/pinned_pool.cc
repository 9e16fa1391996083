#include "hal/cuda/pinned_pool.h"

#include <cuda_runtime.h>


namespace strider::cuda {
namespace {

// Blocks are sized in steps of 64 KiB, so outputs of nearly one size share blocks.
constexpr size_t kStep = size_t(64) << 10;

// Runs `call` with GPU `ordinal` current on this thread, then makes the thread's own
// current device current again.
template <typename Call>
auto on_device(int ordinal, Call&& call) {
  int previous = -1;
  const bool had = cudaGetDevice(&previous) == cudaSuccess;
  cudaSetDevice(ordinal);
  auto result = call();
  if (had && previous != ordinal) cudaSetDevice(previous);
  return result;
}

}  // namespace

PinnedPool::~PinnedPool() {
  on_device(ordinal_, [&] {
    for (const auto& [size, block] : free_) cudaFreeHost(block);
    return 0;
  });
}

HostBuffer PinnedPool::hand_out(std::byte* block, size_t size) {
  return HostBuffer(block, size, [pool = shared_from_this(), size](std::byte* p) { pool->give_back(p, size); });
}

HostBuffer PinnedPool::take(size_t bytes) {
  if (bytes < kMinBytes) return {};
  const size_t size = (bytes + kStep - 1) / kStep * kStep;
  {
    std::lock_guard lock(mutex_);
    auto it = free_.lower_bound(size);
    if (it != free_.end() && it->first <= 2 * size) {  // not a block far larger than asked for
      const auto [block_size, block] = *it;
      free_.erase(it);
      cached_ -= block_size;
      outstanding_ += block_size;
      return hand_out(block, block_size);
    }
    if (outstanding_ + size > kMaxOutstandingBytes) return {};
    outstanding_ += size;  // reserved before the (slow) allocation, outside the lock
  }
  void* memory = nullptr;
  const cudaError_t error =
      on_device(ordinal_, [&] { return cudaHostAlloc(&memory, size, cudaHostAllocPortable); });
  if (error != cudaSuccess) {
    cudaGetLastError();  // not sticky: the caller goes on with pageable memory
    std::lock_guard lock(mutex_);
    outstanding_ -= size;
    return {};
  }
  return hand_out(static_cast<std::byte*>(memory), size);
}

void PinnedPool::give_back(std::byte* block, size_t size) {
  {
    std::lock_guard lock(mutex_);
    outstanding_ -= size;
    if (cached_ + size <= kMaxCachedBytes) {
      free_.emplace(size, block);
      cached_ += size;
      return;
    }
  }
  on_device(ordinal_, [&] { return cudaFreeHost(block); });
}

size_t PinnedPool::outstanding_bytes() const {
  std::lock_guard lock(mutex_);
  return outstanding_;
}

size_t PinnedPool::cached_bytes() const {
  std::lock_guard lock(mutex_);
  return cached_;
}

}  // namespace strider::cuda
