// Device: where allocations live and kernels run. A backend is a handful of functions
// (the ggml way): allocate/release memory, say which ops it has kernels for, create a
// kernel for fixed views, and move bytes between the host and a view.
//
// Ownership: a Device owns every Allocation it returns until release(); views and
// kernels borrow them. Work runs on the device's queues (hal/queue.h): queue 0 is the
// host, 1..N the device's own. Release is queue-ordered: it takes the timepoints of the
// allocation's last uses and returns the memory only once they have completed, never
// after a mere submit.
#pragma once

#include <fmt/format.h>

#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "base/memory_budget.h"
#include "strider/host_buffer.h"
#include "hal/kernel.h"
#include "hal/queue.h"
#include "hal/trace_clock.h"
#include "memory/allocation.h"
#include "ops/fused_attention.h"
#include "ops/fused_elementwise.h"
#include "strider/status.h"
#include "strider/tensor.h"

namespace strider {

struct WaveNetLayerShape;  // ops/wavenet_layer.h

struct DeviceOptions {
  int queues = 1;          // device queues besides the host
  // cpu: threads each kernel may use (oneDNN's OpenMP team per queue); 0: every core.
  int threads = 0;
  // cpu: each command holds a lease on its team's cores from the process's budget
  // (hal/cpu/core_budget.h), so all sessions together keep at most the process's cores busy.
  bool share_process_cores = false;
  // cpu, for tests: the elements each thread must get before a kernel of ours splits its
  // work (0: hal/cpu/parallel.h's default); 1 splits every kernel with two items or more.
  int64_t min_parallel_work = 0;
  uint64_t sim_seed = 0;   // sim: the seed of its execution order
  // sim, for tests: ops it declines (Device::declines) as if it had no kernel for them, so
  // the host fallback's split is tested on machines without a GPU.
  std::vector<std::string> sim_declined_ops;
  // cuda: where allocations live (a performance policy, never a correctness knob).
  StorageMode storage_mode = StorageMode::kDevice;
  bool allow_tf32 = false;  // cuda: f32 matmuls may use TF32 (off: results match the reference)
  bool cpu_winograd = true;  // cpu: 3x3 convolutions may run as Winograd (hal/cpu/winograd_conv.h)
  // What every allocate() reserves from. The CPU devices share it with the session's host
  // allocations (it is the same memory); null on cuda means 90% of the GPU's memory.
  std::shared_ptr<MemoryBudget> budget;
};

class Device {
 public:
  explicit Device(std::shared_ptr<MemoryBudget> budget = nullptr) : budget_(std::move(budget)) {}
  virtual ~Device() = default;
  virtual std::string_view name() const = 0;

  // A block of at least `size` bytes aligned to `alignment` (a power of two >= 64), its
  // bytes reserved from the memory budget first (RESOURCE_EXHAUSTED naming `label` when
  // they do not fit).
  virtual Result<Allocation*> allocate(int64_t size, int64_t alignment, std::string label) = 0;
  // Returns the memory once every timepoint in `last_uses` has completed (blocking).
  virtual void release(Allocation* allocation, std::span<const Timepoint> last_uses = {}) = 0;

  // Queues: 0 is the host, 1..num_queues()-1 the device's.
  virtual int num_queues() const = 0;
  virtual Queue& queue(int index) = 0;
  // Blocks until every queue has completed what was submitted; the first error any
  // command returned since the last synchronize, if one did.
  virtual Status synchronize() = 0;
  // Waits for work others queued on this device (a torch stream still reading memory strider
  // handed out and the caller dropped) before strider writes that memory again. A host
  // device has none: its consumers ran before they dropped the memory.
  virtual Status wait_for_outside_work() { return Status::ok(); }
  // True for devices that poison fresh and reused memory (sim): the executor then also
  // poisons each arena buffer before its first writer, through the queues.
  virtual bool poisons_memory() const { return false; }

  // Whether convolution-heavy graphs computing in `dtype` run faster channels-last (what
  // `--layout auto` asks).
  virtual bool prefers_channels_last(DType) const { return true; }
  // Whether the values of 1-D convolutions, (N, C, T), go channels-last too, as (N, T, C)
  // strides, in the nhwc layout: oneDNN's fast 1-D convolution (brgconv) takes only those
  // (3x faster than its NCW gemm path on a dilated WaveNet conv); cuDNN gains nothing.
  virtual bool channels_last_1d() const { return false; }

  // Whether the planner may place a kernel's output through a Transpose into the bytes of
  // the Reshape after it (plan: kPlacedThrough), so that the kernel writes a view whose
  // batches interleave (attention's heads). A device says yes once its kernels have been
  // checked writing such views; a kernel may still refuse one, and the node goes dense.
  virtual bool places_outputs_through_views() const { return true; }

  // Whether the session should fold an attention of these sizes into FusedAttention for
  // this device: its fused kernel is faster there than the unfused kernels (having the
  // kernel is not enough; on a GPU it depends on how many blocks the sizes give).
  virtual bool fuses_attention(const AttentionShape&) const { return true; }
  // Whether a convolution whose activation writes a Concat's part should be folded into a
  // FusedConv there: oneDNN writes such slices itself; cuDNN refuses channels-last slices,
  // so on CUDA the fused node would go dense and be copied, a pass more than the unfused
  // activation writing the slice.
  virtual bool fuses_conv_into_concat() const { return true; }
  // Whether a pointwise convolution should be folded into the depthwise one that alone
  // reads its output (FusedPointwiseDepthwise, ops/conv_chain.h), the intermediate being
  // `intermediate_bytes`: a device says yes where its fused kernel, which never stores the
  // intermediate whole, is faster than the two steps at that size.
  virtual bool fuses_pointwise_depthwise(int64_t /*intermediate_bytes*/) const { return false; }
  // Whether a gated unit's convolution and gate should run as one FusedGatedConv
  // (passes/fuse_gated_conv.h), where the device has a kernel for it.
  virtual bool fuses_gated_conv(const GatedConvUnit&) const { return true; }
  // Whether a gated residual unit of one tap should run inside a FusedGatedStack with the
  // units it chains with (passes/fuse_gated_stack.h), where the device has a kernel for it.
  virtual bool fuses_gated_stack(const GatedConvUnit&) const { return false; }
  // Whether a WaveNet layer's gate and the projections that read it should run as one
  // FusedWaveNetLayer (passes/fuse_wavenet_layer.h), where the device has a kernel for it.
  virtual bool fuses_wavenet_layer(const WaveNetLayerShape&) const { return false; }
  // Whether MatMuls that read one activation with constant weights should run as one
  // product and a Split (passes/merge_sibling_matmuls.h): fewer kernels where each costs a
  // launch, but each sibling loses an epilogue that reads another one's product.
  virtual bool merges_sibling_matmuls() const { return true; }
  // Whether a Linear Gemm read by one elementwise node should become a MatMul over B's
  // transposed view with the reader as its epilogue (passes/gemm_as_matmul.h): one kernel
  // where a library reads the transposed view as it is, a loss where the device's Gemm
  // kernels pack constant weights, which a view of them hides.
  virtual bool rewrites_linear_gemms() const { return false; }
  // The most elements an output may have for its FusedElementwise to run in a
  // FusedMapGroup with independent others (passes/group_maps.h): where a small map costs
  // its launch, not its bytes. 0: never grouped.
  virtual int64_t max_grouped_map_elements() const { return 0; }

  virtual bool has_kernel(std::string_view op_type) const = 0;
  virtual Result<std::unique_ptr<Kernel>> create_kernel(const KernelRequest& request) = 0;
  // Why the device cannot run `node` (its op, or the dtypes of its operands in `graph`), or
  // an empty string when it can. A session splits its graph at the first node its device
  // declines and computes that node on the host with the CPU kernels
  // (exec/staged_session.h). The host devices (cpu, sim) decline nothing.
  virtual std::string declines(const Graph& graph, const Node& node) const { return {}; }
  // Whether its kernels are the host's CPU kernels (cpu, sim): a node it has no kernel
  // for has none on the host either, so there is nothing to fall back to.
  virtual bool computes_on_host() const { return true; }

  // Copies between a host tensor and a view of the same dtype and sizes (any strides).
  // download writes into `destination` when it already has the view's dtype and sizes
  // (a caller's tensor, borrowed or not) and replaces it with a new tensor otherwise.
  // These touch memory directly: callers order them, as host-queue commands, through the
  // hazard tracker.
  virtual Status upload(const Tensor& source, const TensorView& destination) = 0;
  virtual Status download(const TensorView& source, Tensor* destination) = 0;
  // Several of them as one transfer (a run's inputs, its outputs), with the same meaning
  // as one call each, in turn (what the defaults do): a device may overlap them and wait
  // once (cuda). The upload destinations must not overlap one another.
  struct Upload {
    const Tensor* source;
    const TensorView* destination;
  };
  struct Download {
    const TensorView* source;
    Tensor* destination;
  };
  virtual Status upload_all(std::span<const Upload> uploads);
  virtual Status download_all(std::span<const Download> downloads);
  // Host memory that upload and download move fastest (strider/host_buffer.h): pinned on
  // cuda. Not counted in the memory budget (it is the caller's, like its tensors). The
  // host devices give 64-byte aligned memory.
  virtual Result<HostBuffer> allocate_host(size_t bytes);
  // The clock a traced run stamps its commands with (hal/trace_clock.h): the host's where
  // work runs as it executes; a GPU's stamps are events on its streams.
  virtual std::unique_ptr<TraceClock> make_trace_clock() { return make_host_trace_clock(); }

  // Null when allocations are unbounded.
  MemoryBudget* memory_budget() const { return budget_.get(); }

 protected:
  // For allocate() and release() of every device.
  Status reserve_memory(int64_t bytes, const std::string& label) {
    return budget_ ? budget_->reserve(bytes, fmt::format("{} memory for the {}", name(), label)) : Status::ok();
  }
  void return_memory(int64_t bytes) {
    if (budget_) budget_->release(bytes);
  }
  std::shared_ptr<MemoryBudget> budget_;
};

// "cpu" (the default), "sim", "cuda" or "cuda:N". An unknown name is INVALID_ARGUMENT
// listing the valid ones; cuda on a machine without a GPU is a DEVICE_ERROR.
Result<std::unique_ptr<Device>> create_device(std::string_view name, const DeviceOptions& options = {});

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
