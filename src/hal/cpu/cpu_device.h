// The CPU device: host memory from the C++ heap (64-byte aligned), kernels from the CPU
// kernel table. Synchronous in this first executor.
#pragma once

#include <atomic>

#include "hal/device.h"

namespace strider::cpu {

class CpuDevice final : public Device {
 public:
  std::string_view name() const override { return "cpu"; }
  Result<Allocation*> allocate(int64_t size, int64_t alignment, std::string label) override;
  void release(Allocation* allocation) override;
  bool has_kernel(std::string_view op_type) const override;
  Result<std::unique_ptr<Kernel>> create_kernel(const KernelRequest& request) override;
  Status upload(const Tensor& source, const TensorView& destination) override;
  Status download(const TensorView& source, Tensor* destination) override;

 private:
  std::atomic<uint64_t> next_id_{1};
};

}  // namespace strider::cpu
