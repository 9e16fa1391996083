// Binding: a plan (data, on placeholder allocations) given real memory on one device.
//
// bind_plan allocates the plan's arena, input and output blocks on the device, takes each
// constant buffer's device copy from a DeviceConstants store (uploading it only if the
// store has none yet), and returns a copy of the plan whose every view names a real
// allocation. The offsets inside arena, inputs and outputs are the plan's; a constant
// buffer's views are rebased to offset 0 of that constant's own allocation, which is what
// lets plans for different input shapes share one device copy of each weight.
//
// Ownership: a BoundPlan owns its arena, input and output allocations and holds a
// reference on every constant allocation it uses; the Device must outlive it. Release is
// the device's (queue-ordered); whoever destroys a BoundPlan first lets the device's
// queues finish with it (Session's destructor synchronizes).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

#include "hal/device.h"
#include "plan/plan.h"

namespace strider {

// Device copies of constants, shared by every plan bound through the same store (a
// DynamicSession's cached shapes). Keyed by the host tensor's identity (the graph's
// shared_ptr: copies of one imported graph share their weights) and the view its plan
// gives it (dtype and strides: an nhwc weight is laid out channels-last). An entry lives
// while a plan uses it; the store keeps only weak references, so memory goes with the last
// plan. Thread-safe.
class DeviceConstants {
 public:
  explicit DeviceConstants(std::shared_ptr<Device> device) : device_(std::move(device)) {}

  // Drops the entries whose device copy no plan holds any more (and the host tensors they
  // pin). A bind calls it once before its get()s: sweeping in every get() made binding a
  // plan of N constants O(N^2) (0.05 s of a 1764-node unrolled LSTM's session).
  void forget_unheld();
  // The device copy of `host` laid out as `view` (whose allocation is ignored), uploaded
  // now if no live plan has it. `size` is the allocation's size in bytes.
  Result<std::shared_ptr<const Allocation>> get(const std::shared_ptr<const Tensor>& host, const TensorView& view,
                                                int64_t size, const std::string& label);
  // Uploads done so far (a hit uploads nothing): what tests and `inspect` count.
  int64_t uploads() const;
  // Bytes of device copies alive now.
  int64_t live_bytes() const;

 private:
  using Key = std::tuple<const Tensor*, DType, Strides>;
  struct Entry {
    std::shared_ptr<const Tensor> host;  // pins the identity the key names
    std::weak_ptr<const Allocation> device_copy;
    int64_t size = 0;
  };
  std::shared_ptr<Device> device_;
  mutable std::mutex mutex_;
  std::map<Key, Entry> entries_;
  int64_t uploads_ = 0;
};

struct BoundPlan {
  Plan plan;  // views on real allocations (its placeholders are the planned plan's sizes)
  std::vector<AllocationHandle> allocations;                  // arena, inputs, outputs
  std::vector<std::shared_ptr<const Allocation>> constants;   // shared device copies
  // Allocations standing for the caller's memory (ExternalMemory): not owned bytes.
  std::vector<std::unique_ptr<Allocation>> external;
};

// Caller memory that graph inputs and outputs are bound to instead of the plan's input and
// output blocks, so kernels read the caller's inputs and write the caller's outputs where
// they are (no copy). Per value (a graph input or output root): the address of its first
// element, dense row-major. `host_accessible`: whether the host can touch that memory (the
// CPU devices' memory; not a GPU's). The caller keeps the memory alive and unaliased for as
// long as the BoundPlan (and every kernel made for it) is used.
struct ExternalMemory {
  std::map<ValueId, std::byte*> addresses;
  bool host_accessible = true;
};

// Binds `plan` (made for `graph`) on `device`. RESOURCE_EXHAUSTED naming the block when
// memory runs out; nothing stays allocated then. With `external`, the values it names live
// in the caller's memory (their views rebased to offset 0 of an allocation over it).
Result<BoundPlan> bind_plan(const Plan& plan, const Graph& graph, Device& device, DeviceConstants& constants,
                            const ExternalMemory* external = nullptr);

}  // namespace strider
