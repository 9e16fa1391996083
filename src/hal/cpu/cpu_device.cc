#include "hal/cpu/cpu_device.h"

#include "hal/cpu/parallel.h"
#include "hal/cpu/winograd_conv.h"

#include <fmt/format.h>

#include <cstdlib>
#include <limits>
#include <string_view>
#include <new>

#include "hal/cpu/copy.h"
#include "hal/cpu/cpu_kernels.h"
#include "hal/cpu/worker_queue.h"

namespace strider::cpu {

CpuDevice::CpuDevice(const DeviceOptions& options)
    : Device(options.budget), threads_(options.threads), winograd_(options.cpu_winograd),
      min_parallel_work_(options.min_parallel_work) {
  auto queue_of = [this](int index) -> Queue& { return queue(index); };
  CoreBudget* budget = options.share_process_cores ? &CoreBudget::process() : nullptr;
  if (options.queues == 1) {
    // Both queues run in the caller's thread, which is the team's master: the uploads and
    // downloads (transposing copies into and out of a channels-last plan) split over the
    // team as the steps do.
    HostQueue::Around master = as_team_master(budget, options.threads, options.min_parallel_work);
    queues_.push_back(std::make_unique<HostQueue>(queue_of, kHostQueue, master));
    queues_.push_back(std::make_unique<HostQueue>(queue_of, 1, master));
    return;
  }
  queues_.push_back(std::make_unique<HostQueue>(queue_of));
  for (int i = 1; i <= options.queues; ++i)
    queues_.push_back(std::make_unique<WorkerQueue>(i, queue_of, options.threads, options.min_parallel_work, budget));
}

CpuDevice::~CpuDevice() {
  // Workers finish their queues before the memory their kernels use goes away. Not the
  // virtual synchronize(): a derived device is already gone here.
  for (auto& q : queues_) (void)q->wait(q->next().value - 1);
}

Status CpuDevice::synchronize() {
  Status first;
  for (auto& q : queues_) {
    Status s = q->wait(q->next().value - 1);
    if (!s.is_ok() && first.is_ok()) first = s;
  }
  return first;
}

void CpuDevice::wait_for(std::span<const Timepoint> timepoints) {
  for (const Timepoint& t : timepoints) (void)queue(t.queue).wait(t.value);
}

Result<Allocation*> CpuDevice::allocate(int64_t size, int64_t alignment, std::string label) {
  if (size < 0 || alignment < 64 || (alignment & (alignment - 1)) != 0)
    return internal_error(fmt::format("bad allocation request: {} bytes aligned to {}", size, alignment));
  // aligned_alloc wants a multiple of the alignment; a zero-byte request still gets a block.
  size_t rounded = size_t((std::max<int64_t>(size, 1) + alignment - 1) / alignment * alignment);
  STRIDER_RETURN_IF_ERROR(reserve_memory(size, label));
  void* memory = std::aligned_alloc(size_t(alignment), rounded);
  if (memory == nullptr) {
    return_memory(size);
    return resource_exhausted(fmt::format("cpu: out of memory allocating {} bytes for the {}", size, label));
  }
  return new Allocation(next_id_++, std::move(label), "cpu", static_cast<std::byte*>(memory), size,
                        alignment, StorageMode::kHost, true);
}

void CpuDevice::release(Allocation* allocation, std::span<const Timepoint> last_uses) {
  wait_for(last_uses);
  std::free(allocation->address());
  return_memory(allocation->size());
  delete allocation;
}

bool CpuDevice::has_kernel(std::string_view op_type) const { return cpu::has_kernel(op_type); }

// An intermediate that the caches do not keep between the two steps. Measured inside
// MobileNetV2's run at one thread (AMD EPYC, Zen 5): its first block's 4.8 MB expansion
// took 0.29-0.42 ms against 0.20 ms alone with its memory cached (the rest of the run had
// evicted the arena bytes it writes), and the fused kernel saved 0.06-0.08 ms of the
// block's 0.41-0.44; the 1.8 MB expansions of the next blocks ran as fast in the run as
// alone, and fused they gained nothing. STRIDER_CPU_CONV_CHAIN=off (for measuring) never
// fuses; STRIDER_CPU_CONV_CHAIN=BYTES sets the smallest intermediate fused.
bool CpuDevice::fuses_pointwise_depthwise(int64_t intermediate_bytes) const {
  static const int64_t smallest = [] {
    const char* env = std::getenv("STRIDER_CPU_CONV_CHAIN");
    if (env && std::string_view(env) == "off") return std::numeric_limits<int64_t>::max();
    return env ? std::max<int64_t>(std::atoll(env), 0) : int64_t(4) << 20;
  }();
  return intermediate_bytes >= smallest;
}

Result<std::unique_ptr<Kernel>> CpuDevice::create_kernel(const KernelRequest& request) {
  ScopedOmpThreads team(threads_);  // oneDNN sizes a primitive's team at creation
  const bool allowed = thread_allows_winograd;
  thread_allows_winograd = winograd_;
  const int64_t min_work = thread_min_work_per_thread;  // kernels size their splits by it
  if (min_parallel_work_ > 0) thread_min_work_per_thread = min_parallel_work_;
  Result<std::unique_ptr<Kernel>> kernel = cpu::create_kernel(request);
  thread_allows_winograd = allowed;
  thread_min_work_per_thread = min_work;
  return kernel;
}

Status CpuDevice::upload(const Tensor& source, const TensorView& destination) {
  if (source.dtype() != destination.dtype || source.shape() != destination.sizes)
    return internal_error(fmt::format("upload of {}{} into {}", dtype_name(source.dtype()),
                                      shape_to_string(source.shape()), destination.to_string()));
  Strides dense = contiguous_strides(source.shape());
  copy_strided(destination.sizes, destination.host_data(), destination.strides.data(), source.bytes(),
               dense.data(), dtype_size(source.dtype()));
  return Status::ok();
}

Status CpuDevice::download(const TensorView& source, Tensor* destination) {
  if (!destination->has_layout(source.dtype, source.sizes))
    *destination = Tensor::for_overwrite(source.dtype, source.sizes);  // every byte is copied below
  Strides dense = contiguous_strides(source.sizes);
  copy_strided(source.sizes, destination->bytes(), dense.data(), source.host_data(), source.strides.data(),
               dtype_size(source.dtype));
  return Status::ok();
}

}  // namespace strider::cpu

