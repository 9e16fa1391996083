// The CPU device: host memory from the C++ heap (64-byte aligned), kernels from the CPU
// kernel table, and asynchronous queues: each device queue is a worker thread, so a
// kernel runs after submit() has returned and the host waits on timepoints for results.
//
// Except a session of one queue: its queue runs each command in the submitting thread, as
// the host queue does, that thread then starting the kernels' OpenMP teams as a worker
// would. One queue has nothing to overlap, and a worker made every run pay a hand-off
// (submit, wake-up, completion) and made the inputs the caller had just written and the
// outputs it then read cross between cores: C2f at 40x40, run() was 58 us above the
// steps' own time at one thread and 57 at two with a worker, 15 and 33 without. The cost:
// the OpenMP pool belongs to the calling thread, so a session run from many threads in
// turn has a pool in each (a worker kept one per queue). Several queues keep workers.
#pragma once

#include <atomic>
#include <memory>
#include <vector>

#include "hal/device.h"
#include "hal/host_queue.h"

namespace strider::cpu {

class CpuDevice : public Device {
 public:
  explicit CpuDevice(const DeviceOptions& options);
  ~CpuDevice() override;
  std::string_view name() const override { return "cpu"; }
  Result<Allocation*> allocate(int64_t size, int64_t alignment, std::string label) override;
  void release(Allocation* allocation, std::span<const Timepoint> last_uses) override;
  int num_queues() const override { return int(queues_.size()); }
  Queue& queue(int index) override { return *queues_.at(size_t(index)); }
  Status synchronize() override;
  bool has_kernel(std::string_view op_type) const override;
  bool channels_last_1d() const override { return true; }  // oneDNN's brgconv reads NWC only
  bool fuses_pointwise_depthwise(int64_t intermediate_bytes) const override;
  // Its FusedGatedConv kernel is the convolution then the gate through scratch: no pass is
  // saved, so no model's units are fused (the kernel exists for the kernel suite).
  bool fuses_gated_conv(const GatedConvUnit&) const override { return false; }
  // No: oneDNN applies Llama's gate as a post-op of the gate's product that reads the up
  // product (binary_mul), which the merged product gives up for a pass of its own; merged,
  // the b32 decoder was 5% slower, and Whisper's Q and V no faster (bench/RESULTS.md).
  bool merges_sibling_matmuls() const override { return false; }
  // No: a Gemm of one row runs on the row product (hal/cpu/row_matmul.h) and others on
  // oneDNN with their weights reordered once; a MatMul over B's transposed view gets
  // neither (Linear + Relu of 1 x 1280 by 1280 x 1000: 0.178 ms rewritten, 0.061 as a Gemm).
  bool rewrites_linear_gemms() const override { return false; }
  Result<std::unique_ptr<Kernel>> create_kernel(const KernelRequest& request) override;
  Status upload(const Tensor& source, const TensorView& destination) override;
  Status download(const TensorView& source, Tensor* destination) override;

 protected:
  // For devices that bring their own queues (sim); allocations still reserve from `budget`.
  explicit CpuDevice(std::shared_ptr<MemoryBudget> budget) : Device(std::move(budget)) {}
  void wait_for(std::span<const Timepoint> timepoints);
  std::vector<std::unique_ptr<Queue>> queues_;
  std::atomic<uint64_t> next_id_{1};
  int threads_ = 0;  // SessionOptions::threads: kernels are created under it too
  bool winograd_ = true;  // SessionOptions::winograd: kernels are created under it (thread_allows_winograd)
  int64_t min_parallel_work_ = 0;  // DeviceOptions::min_parallel_work: kernels are created under it too
};

}  // namespace strider::cpu
