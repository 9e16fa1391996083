// Session::run(const IoBinding&): runs on the caller's memory (strider/io_binding.h).
//
// The session's plan is bound a second time, with the graph's inputs and outputs placed in
// the caller's memory (bind_plan's ExternalMemory) instead of the session's input and
// output blocks; kernels are made for those views and an executor runs the steps alone,
// with nothing to upload or download. One such variant per set of addresses, a few cached.
#include <fmt/format.h>

#include <algorithm>

#include "base/exception_guard.h"
#include "strider/printable.h"
#include "base/onnx_types.h"
#include "exec/session_impl.h"
#include "ir/builder.h"

namespace strider {
namespace {

constexpr size_t kMaxVariants = 4;
constexpr uintptr_t kBoundAlignment = 16;

// The CUDA ordinal of the session's device, or -1 for a host device (cpu, sim).
int device_ordinal(const std::string& device) {
  if (device.rfind("cuda", 0) != 0) return -1;
  return device.size() > 5 ? std::atoi(device.c_str() + 5) : 0;
}

// Checks one bound tensor against the value it stands for.
Status check_bound(const char* what, const ValueInfo& info, const MemoryRef* memory, const TensorView& planned,
                   int ordinal) {
  const std::string name = printable(info.name);
  if (memory == nullptr) return invalid_argument(fmt::format("{} '{}' is not bound", what, name));
  if (memory->dtype != info.dtype)
    return invalid_argument(fmt::format("{} '{}': bound {}, the model's is {}", what, name, dtype_name(memory->dtype),
                                        dtype_name(info.dtype)));
  if (memory->shape != planned.sizes)
    return invalid_argument(fmt::format("{} '{}': bound {}, this run's is {}", what, name,
                                        shape_to_string(memory->shape), shape_to_string(planned.sizes)));
  if (memory->device_ordinal != ordinal)
    return invalid_argument(fmt::format("{} '{}': bound memory of {}, the session runs on {}", what, name,
                                        memory->device_ordinal < 0 ? "the host" : "cuda:" + std::to_string(memory->device_ordinal),
                                        ordinal < 0 ? "a host device" : "cuda:" + std::to_string(ordinal)));
  if (planned.num_elements() > 0 && memory->data == nullptr)
    return invalid_argument(fmt::format("{} '{}': bound to a null address", what, name));
  if (reinterpret_cast<uintptr_t>(memory->data) % kBoundAlignment != 0)
    return invalid_argument(fmt::format("{} '{}': bound memory is not {}-byte aligned", what, name, kBoundAlignment));
  return Status::ok();
}

// Whether the value goes through a StagedCopy instead of living in the caller's memory.
bool needs_staging(const ValueInfo& info, const TensorView& planned) {
  return planned.dtype != info.dtype || !planned.is_contiguous();
}

Result<Session::Impl::StagedCopy> make_staged_copy(Device& device, const ValueInfo& info, void* caller,
                                                   const TensorView& planned, bool input, bool host_accessible,
                                                   uint64_t id) {
  Session::Impl::StagedCopy c;
  const int64_t bytes = num_elements(planned.sizes) * int64_t(dtype_size(info.dtype));
  c.caller = std::make_unique<Allocation>(id, fmt::format("caller:{}", printable(info.name)), device.name(),
                                          static_cast<std::byte*>(caller), bytes, 1, StorageMode::kDevice, host_accessible);
  STRIDER_ASSIGN_OR_RETURN(TensorView theirs, make_dense_view(*c.caller, 0, info.dtype, planned.sizes, "bound memory"));
  const TensorView& from = input ? theirs : planned;
  const TensorView& to = input ? planned : theirs;
  GraphBuilder b;
  b.output(b.op("Cast", {b.input("x", from.dtype, from.sizes)}, int_attribute("to", onnx_type_code(to.dtype))));
  c.graph = b.build();
  STRIDER_ASSIGN_OR_RETURN(c.kernel, device.create_kernel(KernelRequest{c.graph, c.graph.node(0), {from}, {to}}));
  c.before_steps = input;
  c.label = fmt::format("{} '{}': {} {} -> {} {}", input ? "input" : "output", printable(info.name), dtype_name(from.dtype),
                        shape_to_string(from.strides), dtype_name(to.dtype), shape_to_string(to.strides));
  return c;
}

// Runs the staged copies of one side on the first device queue and waits for them (the
// queues are idle before and after a run's steps, so nothing else orders against them).
Status run_staged(Device& device, std::vector<Session::Impl::StagedCopy>& copies, bool before_steps) {
  Queue& queue = device.queue(device.num_queues() > 1 ? 1 : kHostQueue);
  uint64_t last = 0;
  for (Session::Impl::StagedCopy& c : copies) {
    if (c.before_steps != before_steps) continue;
    Kernel* kernel = c.kernel.get();
    last = queue.submit(Command{c.label, [kernel](const QueueContext& context) { return kernel->run(context); }, {}}).value;
  }
  return last == 0 ? Status::ok() : queue.wait(last);
}

// No bound output may overlap another bound tensor: kernels would write through the other.
Status check_no_overlap(const std::vector<const MemoryRef*>& all, const std::vector<std::string>& names,
                        size_t first_output) {
  auto bytes = [](const MemoryRef* m) {  // shapes were checked against the plan's
    uintptr_t n = uintptr_t(dtype_size(m->dtype));
    for (int64_t d : m->shape) n *= uintptr_t(d);
    return n;
  };
  for (size_t o = first_output; o < all.size(); ++o)
    for (size_t i = 0; i < all.size(); ++i) {
      if (i == o) continue;
      const uintptr_t a = reinterpret_cast<uintptr_t>(all[o]->data), b = reinterpret_cast<uintptr_t>(all[i]->data);
      if (a < b + bytes(all[i]) && b < a + bytes(all[o]) && bytes(all[o]) > 0 && bytes(all[i]) > 0)
        return invalid_argument(fmt::format("output '{}' overlaps '{}' in the bound memory", printable(names[o]),
                                            printable(names[i])));
    }
  return Status::ok();
}

}  // namespace

// One allocation handed out as a bound output; returned to the device when the pool and
// every DeviceOutput over it are gone (it keeps the device alive until then).
struct OutputMemory {
  std::shared_ptr<Device> device;
  Allocation* allocation = nullptr;
  OutputMemory(std::shared_ptr<Device> d, Allocation* a) : device(std::move(d)), allocation(a) {}
  ~OutputMemory() { device->release(allocation); }
  OutputMemory(const OutputMemory&) = delete;
  OutputMemory& operator=(const OutputMemory&) = delete;
};

Result<Tensor> DeviceOutput::to_host() const {
  if (!owner_) return invalid_argument("the output has not been written by a run");
  STRIDER_ASSIGN_OR_RETURN(TensorView view, make_dense_view(*owner_->allocation, 0, memory_.dtype, memory_.shape, "output"));
  Tensor host(memory_.dtype, memory_.shape);
  STRIDER_RETURN_IF_ERROR(owner_->device->download(view, &host));
  return host;
}

// Memory for output `name` of this run's shape: a pooled allocation nobody holds any more,
// else a new one. At most kMaxPooled per output stay pooled (the rest go when dropped).
Result<MemoryRef> Session::Impl::pooled_output(const std::string& name, const TensorView& planned, int ordinal) {
  constexpr size_t kMaxPooled = 4;
  const int64_t bytes = planned.num_elements() * int64_t(dtype_size(planned.dtype));
  std::vector<std::shared_ptr<OutputMemory>>& pool = output_pool[name];
  std::shared_ptr<OutputMemory> chosen;
  for (const auto& m : pool)
    if (m.use_count() == 1 && m->allocation->size() == bytes) chosen = m;
  if (chosen) {
    STRIDER_RETURN_IF_ERROR(device->wait_for_outside_work());
  } else {
    std::erase_if(pool, [&](const auto& m) { return m.use_count() == 1 && pool.size() >= kMaxPooled; });
    STRIDER_ASSIGN_OR_RETURN(Allocation * a, device->allocate(bytes, 256, "output:" + name));
    chosen = std::make_shared<OutputMemory>(resources->device, a);
    pool.push_back(chosen);
  }
  return MemoryRef{chosen->allocation->address(), planned.dtype, planned.sizes, ordinal};
}

Result<Session::Impl::BoundVariant*> Session::Impl::variant_for(const std::vector<const void*>& addresses,
                                                                const std::vector<bool>& staged) {
  auto hit = std::find_if(variants.begin(), variants.end(), [&](const BoundVariant& v) { return v.addresses == addresses; });
  if (hit != variants.end()) {
    variants.splice(variants.begin(), variants, hit);
    return &variants.front();
  }
  ExternalMemory external;
  external.host_accessible = device_ordinal(options.device) < 0;
  std::vector<ValueId> ids = graph.inputs();
  ids.insert(ids.end(), graph.outputs().begin(), graph.outputs().end());
  for (size_t k = 0; k < ids.size(); ++k)
    if (!staged[k]) external.addresses[ids[k]] = static_cast<std::byte*>(const_cast<void*>(addresses[k]));
  if (variants.size() >= kMaxVariants) variants.pop_back();  // runs end idle: nothing of it is in flight
  // Built in place: the executor keeps references to the variant's plan and kernels.
  variants.emplace_front();
  BoundVariant& variant = variants.front();
  Status made = [&]() -> Status {
    variant.addresses = addresses;
    STRIDER_ASSIGN_OR_RETURN(variant.bound, bind_plan(plan, graph, *device, *resources->constants, &external));
    STRIDER_ASSIGN_OR_RETURN(KernelAttempt attempt, create_kernels(graph, variant.bound.plan, *device));
    if (!attempt.refused_nodes.empty())
      return unsupported(fmt::format("node '{}' refuses the bound memory's views; run with Tensors",
                                     printable(*attempt.refused_nodes.begin())));
    variant.kernels = std::move(attempt.kernels);
    for (size_t k = 0; k < ids.size(); ++k) {
      if (!staged[k]) continue;
      const bool input = k < graph.inputs().size();
      const ValueInfo& info = input ? inputs[k] : outputs[k - graph.inputs().size()];
      STRIDER_ASSIGN_OR_RETURN(StagedCopy copy,
                               make_staged_copy(*device, info, const_cast<void*>(addresses[k]), variant.bound.plan.view(ids[k]),
                                                input, external.host_accessible, uint64_t(1) << 62 | k));
      variant.staged.push_back(std::move(copy));
    }
    variant.executor = std::make_unique<Executor>(graph, variant.bound.plan, variant.kernels, *device, executor_options());
    return Status::ok();
  }();
  if (!made.is_ok()) {
    variants.pop_front();
    return made;
  }
  ++variants_made;
  return &variants.front();
}

Status Session::Impl::run_bound(IoBinding& binding) {
  if (staged)
    return unsupported(fmt::format("running on bound memory needs one plan, and this model is split where a value "
                                   "decides a shape ({})", staged->describe()[1]));
  std::lock_guard lock(running);
  const int ordinal = device_ordinal(options.device);
  // Outputs strider allocates join the caller's as bound memory for this run.
  std::map<std::string, MemoryRef> bound_outputs = binding.outputs();
  for (const auto& entry : binding.device_outputs()) {
    const std::string& name = entry.first;  // (clang 14 cannot capture a structured binding)
    auto info = std::find_if(outputs.begin(), outputs.end(), [&](const ValueInfo& v) { return v.name == name; });
    if (info == outputs.end()) return invalid_argument(fmt::format("'{}' is not an output of the model", printable(name)));
    const TensorView& planned = bound.plan.view(graph.outputs()[size_t(info - outputs.begin())]);
    STRIDER_ASSIGN_OR_RETURN(bound_outputs[name], pooled_output(name, planned, ordinal));
  }
  std::vector<const MemoryRef*> all;
  std::vector<std::string> names;
  auto collect = [&](const char* what, const std::vector<ValueInfo>& infos, const std::vector<ValueId>& ids,
                     const std::map<std::string, MemoryRef>& given) -> Status {
    for (size_t i = 0; i < infos.size(); ++i) {
      auto it = given.find(infos[i].name);
      const MemoryRef* memory = it == given.end() ? nullptr : &it->second;
      STRIDER_RETURN_IF_ERROR(check_bound(what, infos[i], memory, bound.plan.view(ids[i]), ordinal));
      all.push_back(memory);
      names.push_back(infos[i].name);
    }
    for (const auto& entry : given)
      if (std::none_of(infos.begin(), infos.end(), [&](const ValueInfo& v) { return v.name == entry.first; }))
        return invalid_argument(fmt::format("'{}' is not an {} of the model", printable(entry.first), what));
    return Status::ok();
  };
  STRIDER_RETURN_IF_ERROR(collect("input", inputs, graph.inputs(), binding.inputs()));
  STRIDER_RETURN_IF_ERROR(collect("output", outputs, graph.outputs(), bound_outputs));
  STRIDER_RETURN_IF_ERROR(check_no_overlap(all, names, inputs.size()));
  std::vector<const void*> addresses;
  for (const MemoryRef* m : all) addresses.push_back(m->data);
  std::vector<bool> staged;
  for (size_t i = 0; i < inputs.size(); ++i) staged.push_back(needs_staging(inputs[i], bound.plan.view(graph.inputs()[i])));
  for (size_t i = 0; i < outputs.size(); ++i) staged.push_back(needs_staging(outputs[i], bound.plan.view(graph.outputs()[i])));
  STRIDER_ASSIGN_OR_RETURN(BoundVariant * variant, variant_for(addresses, staged));
  STRIDER_RETURN_IF_ERROR(run_staged(*device, variant->staged, true));
  STRIDER_RETURN_IF_ERROR(variant->executor->run_in_place());
  STRIDER_RETURN_IF_ERROR(run_staged(*device, variant->staged, false));
  for (const auto& [name, unused] : binding.device_outputs()) {
    const MemoryRef& memory = bound_outputs.at(name);
    const auto& pool = output_pool.at(name);
    auto owner = std::find_if(pool.begin(), pool.end(), [&](const auto& m) { return m->allocation->address() == memory.data; });
    binding.set_device_output(name, DeviceOutput(memory, *owner));
  }
  return Status::ok();
}

Status Session::run(IoBinding& binding) {
  return guard("run", [&] { return impl_->run_bound(binding); });
}

int64_t bound_variants_made(const Session& session) { return SessionAccess::impl(session).variants_made; }

std::vector<const void*> bound_addresses(const Session& session) {
  const Session::Impl& impl = SessionAccess::impl(session);
  std::vector<const void*> addresses;
  if (impl.variants.empty()) return addresses;
  const Plan& plan = impl.variants.front().bound.plan;
  for (const auto* ids : {&impl.graph.inputs(), &impl.graph.outputs()})
    for (ValueId id : *ids) addresses.push_back(plan.view(id).allocation->address() + plan.view(id).byte_offset);
  return addresses;
}

}  // namespace strider
