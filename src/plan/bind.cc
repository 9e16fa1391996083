#include "plan/bind.h"

#include <fmt/format.h>

#include <algorithm>

#include "plan/planner_state.h"

namespace strider {

Result<std::shared_ptr<const Allocation>> DeviceConstants::get(const std::shared_ptr<const Tensor>& host,
                                                               const TensorView& view, int64_t size,
                                                               const std::string& label) {
  std::lock_guard lock(mutex_);
  Key key{host.get(), view.dtype, view.strides};
  if (auto found = entries_.find(key); found != entries_.end())
    if (std::shared_ptr<const Allocation> held = found->second.device_copy.lock()) return held;  // else upload again
  STRIDER_ASSIGN_OR_RETURN(Allocation * raw, device_->allocate(size, plan_internal::kBufferAlignment, label));
  std::shared_ptr<const Allocation> allocation(raw, [device = device_](const Allocation* a) {
    device->release(const_cast<Allocation*>(a));
  });
  TensorView placed = view;
  placed.allocation = allocation.get();
  placed.byte_offset = 0;
  STRIDER_RETURN_IF_ERROR(device_->upload(*host, placed));
  ++uploads_;
  entries_[key] = Entry{host, allocation, size};
  return allocation;
}

void DeviceConstants::forget_unheld() {
  std::lock_guard lock(mutex_);
  for (auto it = entries_.begin(); it != entries_.end();)
    it = it->second.device_copy.expired() ? entries_.erase(it) : std::next(it);
}

int64_t DeviceConstants::uploads() const {
  std::lock_guard lock(mutex_);
  return uploads_;
}

int64_t DeviceConstants::live_bytes() const {
  std::lock_guard lock(mutex_);
  int64_t bytes = 0;
  for (const auto& [key, entry] : entries_)
    if (!entry.device_copy.expired()) bytes += entry.size;
  return bytes;
}

namespace {

// Everything but the placeholders, which stay with the planned plan.
Plan copy_plan_data(const Plan& plan) {
  Plan copy;
  copy.layout = plan.layout;
  copy.values = plan.values;
  copy.buffers = plan.buffers;
  copy.steps = plan.steps;
  copy.stats = plan.stats;
  return copy;
}

// The real allocation and offset for a view on `placeholder` in buffer `buffer`.
struct Rebase {
  const Allocation* allocation = nullptr;
  int64_t shift = 0;  // subtracted from the planned byte offset
};

// Makes each constant buffer's device copy; returns a rebase per buffer (arena, inputs and
// outputs keep their planned offsets in the block of their kind).
Result<std::vector<Rebase>> rebase_buffers(const Plan& plan, const Graph& graph, const Device& device,
                                           BoundPlan& bound, DeviceConstants& constants, const ExternalMemory* external) {
  std::vector<Rebase> rebases(plan.buffers.size());
  constants.forget_unheld();
  for (size_t b = 0; b < plan.buffers.size(); ++b) {
    const PlanBuffer& buffer = plan.buffers[b];
    auto caller = external ? external->addresses.find(buffer.root) : std::map<ValueId, std::byte*>::const_iterator();
    if (external && caller != external->addresses.end()) {
      if (buffer.kind != StorageKind::kInput && buffer.kind != StorageKind::kOutput)
        return internal_error(fmt::format("'{}' is not a graph input or output", graph.value(buffer.root).name));
      bound.external.push_back(std::make_unique<Allocation>(
          uint64_t(1) << 63 | bound.external.size(), fmt::format("caller:{}", graph.value(buffer.root).name),
          device.name(), caller->second, buffer.size, 1, StorageMode::kDevice, external->host_accessible));
      rebases[b] = {bound.external.back().get(), buffer.offset};
      continue;
    }
    if (buffer.kind != StorageKind::kConstant) {
      rebases[b] = {bound.allocations[size_t(buffer.kind == StorageKind::kArena ? 0 : int(buffer.kind) - 1)].get(), 0};
      continue;
    }
    const Value& root = graph.value(buffer.root);
    if (!root.is_constant()) return internal_error(fmt::format("constant buffer of '{}' holds no constant", root.name));
    STRIDER_ASSIGN_OR_RETURN(std::shared_ptr<const Allocation> copy,
                             constants.get(root.constant, plan.view(buffer.root),
                                           std::max<int64_t>(buffer.size, plan_internal::kBufferAlignment),
                                           fmt::format("const:{}", root.name)));
    rebases[b] = {copy.get(), buffer.offset};
    bound.constants.push_back(std::move(copy));
  }
  return rebases;
}

}  // namespace

Result<BoundPlan> bind_plan(const Plan& plan, const Graph& graph, Device& device, DeviceConstants& constants,
                            const ExternalMemory* external) {
  BoundPlan bound;
  for (StorageKind kind : {StorageKind::kArena, StorageKind::kInput, StorageKind::kOutput}) {
    const Allocation& placeholder = *plan.placeholders.at(size_t(kind));
    STRIDER_ASSIGN_OR_RETURN(Allocation * allocation,
                             device.allocate(placeholder.size(), placeholder.alignment(), placeholder.label()));
    bound.allocations.emplace_back(&device, allocation);
  }
  STRIDER_ASSIGN_OR_RETURN(std::vector<Rebase> rebases, rebase_buffers(plan, graph, device, bound, constants, external));
  bound.plan = copy_plan_data(plan);
  for (auto& value : bound.plan.values) {
    if (!value) continue;
    const Rebase& r = rebases.at(size_t(value->buffer));
    value->view.allocation = r.allocation;
    value->view.byte_offset -= r.shift;
  }
  for (PlanStep& step : bound.plan.steps) {
    const Node& node = graph.node(step.node);
    for (size_t i = 0; i < step.inputs.size(); ++i)
      if (step.inputs[i].allocation) step.inputs[i] = bound.plan.view(node.inputs[i]);
    for (size_t i = 0; i < step.outputs.size(); ++i)
      if (step.outputs[i].allocation) step.outputs[i] = bound.plan.view(node.outputs[i]);
  }
  return bound;
}

}  // namespace strider
