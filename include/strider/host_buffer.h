// HostBuffer: host memory that a session's device moves fastest, for inputs and outputs a
// caller fills or reads itself (Tensor::borrow over it, under Tensor's lifetime rule).
//
// On cuda it is pinned (page-locked) memory: an upload from it or a download into it is
// one DMA at the bus's speed, with no staging copy (pageable memory goes through the
// device's pinned staging buffer: a host copy first). On the CPU devices it is ordinary
// 64-byte aligned memory. Made by DynamicSession::allocate_host_buffer; move-only; the
// memory is freed by its destructor, so it must outlive every run given a view of it.
#pragma once

#include <cstddef>
#include <functional>
#include <utility>

namespace strider {

class HostBuffer {
 public:
  HostBuffer() = default;
  // Takes `data` (`size` bytes), which `free` releases.
  HostBuffer(std::byte* data, size_t size, std::function<void(std::byte*)> free)
      : data_(data), size_(size), free_(std::move(free)) {}
  ~HostBuffer() { reset(); }
  HostBuffer(HostBuffer&& other) noexcept { *this = std::move(other); }
  HostBuffer& operator=(HostBuffer&& other) noexcept {
    if (this != &other) {
      reset();
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
      free_ = std::move(other.free_);
    }
    return *this;
  }
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;

  std::byte* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  void reset() {
    if (data_ && free_) free_(data_);
    data_ = nullptr;
    size_ = 0;
  }
  std::byte* data_ = nullptr;
  size_t size_ = 0;
  std::function<void(std::byte*)> free_;
};

}  // namespace strider
