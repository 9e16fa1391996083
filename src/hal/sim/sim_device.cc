#include "hal/sim/sim_device.h"
#include "base/exception_guard.h"

#include <algorithm>
#include <fmt/format.h>

#include <cstdlib>
#include <cstring>

namespace strider::sim {

constexpr std::byte kPoison{0xFF};  // NaN in f32, f16, bf16 and f64; -1 in integers

class SimDevice::SimQueue final : public Queue {
 public:
  SimQueue(int index, SimDevice& device) : index_(index), device_(device) {}
  int index() const override { return index_; }
  Timepoint next() const override { return {index_, submitted_ + 1}; }
  Timepoint submit(Command command) override {
    device_.enqueue(index_, std::move(command));
    return {index_, ++submitted_};
  }
  Status wait(uint64_t value) override {
    if (value > submitted_) return internal_error("wait for a timepoint never submitted");
    return device_.drain();
  }

 private:
  int index_;
  SimDevice& device_;
  uint64_t submitted_ = 0;
};

SimDevice::SimDevice(const DeviceOptions& options)
    : CpuDevice(options.budget), rng_(options.sim_seed), declined_ops_(options.sim_declined_ops) {
  auto queue_of = [this](int index) -> Queue& { return queue(index); };
  queues_.push_back(std::make_unique<HostQueue>(queue_of));
  for (int i = 1; i <= options.queues; ++i) queues_.push_back(std::make_unique<SimQueue>(i, *this));
  pending_.resize(queues_.size());
  completed_.assign(queues_.size(), 0);
}

SimDevice::~SimDevice() {
  (void)drain();
  // The queues refer to this device's pending lists: they go first, so the base class
  // finds nothing left to synchronize.
  queues_.clear();
  for (auto& [size, block] : pool_) std::free(block);
}

void SimDevice::enqueue(int queue, Command command) { pending_[size_t(queue)].push_back(std::move(command)); }

uint64_t SimDevice::completed(int queue) const { return completed_[size_t(queue)]; }

bool SimDevice::ready(const Command& command) const {
  for (const Timepoint& w : command.waits)
    if (w.queue != kHostQueue && completed_[size_t(w.queue)] < w.value) return false;
  return true;
}

Status SimDevice::drain() {
  while (true) {
    std::vector<int> candidates;
    bool any_pending = false;
    for (size_t q = 1; q < pending_.size(); ++q) {
      if (pending_[q].empty()) continue;
      any_pending = true;
      if (ready(pending_[q].front())) candidates.push_back(int(q));
    }
    if (!any_pending) return first_error_;
    if (candidates.empty()) return internal_error("sim: pending commands wait for timepoints nothing will reach");
    int q = candidates[size_t(std::uniform_int_distribution<size_t>(0, candidates.size() - 1)(rng_))];
    Command command = std::move(pending_[size_t(q)].front());
    pending_[size_t(q)].pop_front();
    Status status = command.work ? guard(command.label, [&] { return command.work(QueueContext{q, nullptr}); }) : Status::ok();
    if (!status.is_ok() && first_error_.is_ok()) first_error_ = status.with_context(command.label);
    ++completed_[size_t(q)];
  }
}

Status SimDevice::synchronize() { return drain(); }

Result<Allocation*> SimDevice::allocate(int64_t size, int64_t alignment, std::string label) {
  int64_t rounded = (std::max<int64_t>(size, 1) + alignment - 1) / alignment * alignment;
  STRIDER_RETURN_IF_ERROR(reserve_memory(size, label));
  std::byte* memory = nullptr;
  auto reused = pool_.find(rounded);
  if (reused != pool_.end() && reinterpret_cast<uintptr_t>(reused->second) % uintptr_t(alignment) == 0) {
    memory = reused->second;
    pool_.erase(reused);
  } else {
    memory = static_cast<std::byte*>(std::aligned_alloc(size_t(alignment), size_t(rounded)));
    if (memory == nullptr) {
      return_memory(size);
      return resource_exhausted(fmt::format("sim: out of memory allocating {} bytes for the {}", size, label));
    }
  }
  std::memset(memory, int(kPoison), size_t(rounded));
  return new Allocation(next_id_++, std::move(label), "sim", memory, size, alignment, StorageMode::kHost, true);
}

void SimDevice::release(Allocation* allocation, std::span<const Timepoint> last_uses) {
  wait_for(last_uses);
  int64_t rounded = (std::max<int64_t>(allocation->size(), 1) + allocation->alignment() - 1) / allocation->alignment() *
                    allocation->alignment();
  pool_.emplace(rounded, allocation->address());
  return_memory(allocation->size());
  delete allocation;
}

std::string SimDevice::declines(const Graph&, const Node& node) const {
  if (std::find(declined_ops_.begin(), declined_ops_.end(), node.op_type) == declined_ops_.end()) return {};
  return "sim declines " + node.op_type + " (a test setting)";
}

}  // namespace strider::sim
