// DeviceBuffer: device memory a kernel owns for its own use (workspaces, tables of
// precomputed indices), freed with the kernel. Values the plan places never live here:
// they are views of the device's allocations.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <span>

#include "hal/cuda/cuda_check.h"

namespace strider::cuda {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept : data_(other.data_), size_(other.size_) { other.data_ = nullptr; }
  ~DeviceBuffer() {
    if (data_) cudaFree(data_);
  }

  // `bytes` of device memory (a zero-byte request still gets a valid pointer).
  Status allocate(size_t bytes) {
    if (data_) cudaFree(data_);
    data_ = nullptr;
    size_ = bytes;
    STRIDER_CUDA_RETURN(cudaMalloc(&data_, bytes ? bytes : 1), "kernel-owned memory");
    return Status::ok();
  }
  // Allocates and copies `bytes` from the host (synchronously: done at kernel creation).
  Status upload(std::span<const std::byte> bytes) {
    STRIDER_RETURN_IF_ERROR(allocate(bytes.size()));
    STRIDER_CUDA_RETURN(cudaMemcpy(data_, bytes.data(), bytes.size(), cudaMemcpyHostToDevice), "kernel tables");
    return Status::ok();
  }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  size_t size() const { return size_; }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace strider::cuda
