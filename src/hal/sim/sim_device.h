// The sim device (`--device sim`, `--sim-seed N`): the CPU kernels, run in an order that
// respects nothing but the declared waits.
//
// Submitting only records a command. At each synchronization (any wait) the device runs
// every pending command in a seeded random interleaving of its queues: each queue stays in
// order, and a command runs only once all its waits are reached. Fresh and reused memory
// is filled with 0xFF bytes (NaN in every float dtype), and the executor poisons each
// arena buffer before its first writer. So a missing dependency gives a wrong answer, or a
// sanitizer finding, on every run with that seed, on a machine with no GPU.
#pragma once

#include <deque>
#include <map>
#include <random>

#include "hal/cpu/cpu_device.h"
#include "ops/fused_map_group.h"

namespace strider::sim {

class SimDevice final : public cpu::CpuDevice {
 public:
  explicit SimDevice(const DeviceOptions& options);
  ~SimDevice() override;
  std::string_view name() const override { return "sim"; }
  Result<Allocation*> allocate(int64_t size, int64_t alignment, std::string label) override;
  void release(Allocation* allocation, std::span<const Timepoint> last_uses) override;
  Status synchronize() override;
  bool poisons_memory() const override { return true; }
  // As CUDA does (the CPU does not): so CI's sim runs, two queues and the sanitizer, check
  // the merged graphs the GPU runs.
  bool merges_sibling_matmuls() const override { return true; }
  bool rewrites_linear_gemms() const override { return true; }
  int64_t max_grouped_map_elements() const override { return kGroupedMapElements; }
  std::string declines(const Graph& graph, const Node& node) const override;

  // Runs every pending command (see above). Errors: the first a command returned, or a
  // deadlock when pending commands wait for timepoints nothing will reach.
  Status drain();
  void enqueue(int queue, Command command);
  uint64_t completed(int queue) const;

 private:
  class SimQueue;
  bool ready(const Command& command) const;

  std::vector<std::deque<Command>> pending_;  // per queue (index 0 unused: the host runs at once)
  std::vector<uint64_t> completed_;
  std::mt19937_64 rng_;
  Status first_error_;
  std::multimap<int64_t, std::byte*> pool_;  // released blocks by size, reused poisoned
  std::vector<std::string> declined_ops_;
};

}  // namespace strider::sim
