// Device: where allocations live and kernels run. A backend is a handful of functions
// (the ggml way): allocate/release memory, say which ops it has kernels for, create a
// kernel for fixed views, and move bytes between the host and a view.
//
// Ownership: a Device owns every Allocation it returns until release(); views and
// kernels borrow them. In this first executor every call is synchronous: when upload,
// download or a kernel's run() returns, the bytes are in place. Queues, timepoints and
// queue-ordered release come with the asynchronous executor (DESIGN.md section 4).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "hal/kernel.h"
#include "memory/allocation.h"
#include "strider/status.h"
#include "strider/tensor.h"

namespace strider {

class Device {
 public:
  virtual ~Device() = default;
  virtual std::string_view name() const = 0;

  // A block of at least `size` bytes aligned to `alignment` (a power of two >= 64).
  virtual Result<Allocation*> allocate(int64_t size, int64_t alignment, std::string label) = 0;
  virtual void release(Allocation* allocation) = 0;

  virtual bool has_kernel(std::string_view op_type) const = 0;
  virtual Result<std::unique_ptr<Kernel>> create_kernel(const KernelRequest& request) = 0;

  // Copies a host tensor into a view of the same dtype and sizes (any strides), and back.
  virtual Status upload(const Tensor& source, const TensorView& destination) = 0;
  virtual Status download(const TensorView& source, Tensor* destination) = 0;
};

// "cpu" (the default). An unknown name is INVALID_ARGUMENT listing the valid ones.
Result<std::unique_ptr<Device>> create_device(std::string_view name);

// Releases an allocation through its device when it goes out of scope.
class AllocationHandle {
 public:
  AllocationHandle() = default;
  AllocationHandle(Device* device, Allocation* allocation) : device_(device), allocation_(allocation) {}
  AllocationHandle(AllocationHandle&& other) noexcept { *this = std::move(other); }
  AllocationHandle& operator=(AllocationHandle&& other) noexcept {
    reset();
    device_ = other.device_;
    allocation_ = other.allocation_;
    other.allocation_ = nullptr;
    return *this;
  }
  ~AllocationHandle() { reset(); }
  Allocation* get() const { return allocation_; }
  Allocation& operator*() const { return *allocation_; }
  Allocation* operator->() const { return allocation_; }

 private:
  void reset() {
    if (allocation_) device_->release(allocation_);
    allocation_ = nullptr;
  }
  Device* device_ = nullptr;
  Allocation* allocation_ = nullptr;
};

}  // namespace strider
