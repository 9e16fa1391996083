#include "strider/dynamic_session.h"

#include <fmt/format.h>

#include <algorithm>
#include <list>
#include <mutex>

#include "base/exception_guard.h"
#include "base/memory_budget.h"
#include "strider/printable.h"
#include "exec/model_impl.h"
#include "exec/session_internal.h"
#include "onnx/importer.h"

namespace strider {

struct DynamicSession::Impl {
  struct Cached {
    std::vector<Shape> shapes;  // per input, in inputs order
    std::unique_ptr<Session> session;
  };

  Graph graph;  // as imported: weights shared (shared_ptr) by every cached Session's copy
  SessionOptions options;
  PlanOptions plan_options;
  // One device, one store of device constants and one memory budget for every cached
  // Session: a weight is uploaded once, and max_memory_bytes bounds the cache as a whole.
  std::shared_ptr<SessionResources> resources;
  Options dynamic;
  std::vector<ValueInfo> inputs, outputs;
  std::list<Cached> cache;  // most recently used first
  int64_t plans_made = 0;
  mutable std::mutex mutex;

  // The input shapes of a run, checked against what the model and the pins allow.
  Result<std::vector<Shape>> shapes_of(const std::map<std::string, Shape>& given) const {
    std::vector<Shape> shapes;
    for (const ValueInfo& info : inputs) {
      auto it = given.find(info.name);
      if (it == given.end()) return invalid_argument(fmt::format("missing input '{}'", printable(info.name)));
      const Shape& shape = it->second;
      if (shape.size() != info.shape.size())
        return invalid_argument(fmt::format("input '{}': got rank {} ({}), expected rank {} ({})", printable(info.name),
                                            shape.size(), shape_to_string(shape), info.shape.size(),
                                            shape_to_string(info.shape)));
      for (size_t d = 0; d < shape.size(); ++d)
        if (info.shape[d] >= 0 && shape[d] != info.shape[d]) {
          const std::string& param = info.dim_params[d];
          return invalid_argument(fmt::format("input '{}' dim {}{}: got {}, expected {}{}", printable(info.name), d,
                                              param.empty() ? "" : " ('" + printable(param) + "')", shape[d],
                                              info.shape[d], param.empty() ? "" : " (pinned)"));
        }
      shapes.push_back(shape);
    }
    for (const auto& entry : given)  // (clang 14 cannot capture a structured binding)
      if (std::none_of(inputs.begin(), inputs.end(), [&](const ValueInfo& i) { return i.name == entry.first; }))
        return invalid_argument(fmt::format("'{}' is not an input of the model", printable(entry.first)));
    return shapes;
  }

  // The cached Session for these shapes, made (and cached) if there is none.
  Result<Session*> session_for(const std::vector<Shape>& shapes) {
    auto hit = std::find_if(cache.begin(), cache.end(), [&](const Cached& c) { return c.shapes == shapes; });
    if (hit != cache.end()) {
      cache.splice(cache.begin(), cache, hit);
      return cache.front().session.get();
    }
    SessionOptions shaped = options;
    for (size_t i = 0; i < inputs.size(); ++i) shaped.input_shapes[inputs[i].name] = shapes[i];
    STRIDER_ASSIGN_OR_RETURN(std::unique_ptr<Session> session, create_evicting(shaped));
    ++plans_made;
    cache.push_front({shapes, std::move(session)});
    while (int(cache.size()) > std::max(1, dynamic.max_cached_shapes)) cache.pop_back();
    return cache.front().session.get();
  }

  // A Session for `shaped`; when the memory budget cannot hold it next to the cached ones,
  // the least recently used go, one at a time, until it fits or none is left.
  Result<std::unique_ptr<Session>> create_evicting(const SessionOptions& shaped) {
    for (;;) {
      auto session = create_session(graph, shaped, plan_options, resources);
      if (session.is_ok() || session.status().code() != StatusCode::kResourceExhausted || cache.empty())
        return session;
      cache.pop_back();
    }
  }

  // The imported weights are host memory every cached Session shares: reserved once here.
  // Plans the shapes `other` has cached, so an instance is as ready as the first.
  Status plan_like(const Impl& other) {
    std::lock_guard lock(other.mutex);
    for (auto it = other.cache.rbegin(); it != other.cache.rend(); ++it) STRIDER_RETURN_IF_ERROR(session_for(it->shapes).status());
    return Status::ok();
  }

  Status reserve_weights() {
    int64_t bytes = 0;
    for (ValueId id = 0; id < graph.num_values(); ++id) {
      const Value& v = graph.value(id);
      if (v.is_constant() && resources->host_constants.insert(v.constant.get()).second)
        bytes += int64_t(v.constant->byte_size());
    }
    return resources->budget->reserve(bytes, "the model's constants");
  }
};

namespace {

Status pin_dims(std::vector<ValueInfo>& inputs, const std::map<std::string, int64_t>& pins) {
  for (const auto& [name, size] : pins) {
    if (size < 0) return invalid_argument(fmt::format("pinned dim '{}': size {} is negative", printable(name), size));
    bool found = false;
    for (ValueInfo& info : inputs)
      for (size_t d = 0; d < info.shape.size(); ++d)
        if (info.dim_params[d] == name) {
          info.shape[d] = size;
          found = true;
        }
    if (!found) return invalid_argument(fmt::format("pinned dim '{}' names no input dim of the model", printable(name)));
  }
  return Status::ok();
}

bool all_static(const std::vector<ValueInfo>& inputs) {
  for (const ValueInfo& info : inputs)
    for (int64_t d : info.shape)
      if (d < 0) return false;
  return true;
}

}  // namespace

DynamicSession::DynamicSession(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
DynamicSession::~DynamicSession() = default;

Result<std::unique_ptr<DynamicSession>> DynamicSession::load(const std::string& model_path,
                                                             const SessionOptions& options, const Options& dynamic) {
  return guard("loading the model", [&]() -> Result<std::unique_ptr<DynamicSession>> {
    auto impl = std::make_unique<Impl>();
    ImportOptions import_options;
    import_options.max_constant_bytes =
        options.max_memory_bytes > 0 ? options.max_memory_bytes : default_host_memory_budget();
    STRIDER_ASSIGN_OR_RETURN(impl->graph, import_model_file(model_path, import_options));
    STRIDER_RETURN_IF_ERROR(check_ops_known(impl->graph));
    STRIDER_RETURN_IF_ERROR(bind_constant_inputs(impl->graph, options));
    impl->options = options;
    impl->options.constant_inputs.clear();  // now constants of the graph itself
    impl->dynamic = dynamic;
    STRIDER_ASSIGN_OR_RETURN(impl->plan_options, plan_options_for(options));
    STRIDER_ASSIGN_OR_RETURN(impl->resources, make_session_resources(options));
    STRIDER_RETURN_IF_ERROR(impl->reserve_weights());
    impl->inputs = describe_inputs(impl->graph);
    impl->outputs = describe_outputs(impl->graph);
    for (ValueInfo& info : impl->inputs) {
      auto given = options.input_shapes.find(info.name);
      if (given != options.input_shapes.end() && given->second.size() == info.shape.size()) info.shape = given->second;
    }
    STRIDER_RETURN_IF_ERROR(pin_dims(impl->inputs, dynamic.pinned_dims));
    for (const auto& shapes : dynamic.prepared_shapes) {
      STRIDER_ASSIGN_OR_RETURN(std::vector<Shape> ordered, impl->shapes_of(shapes));
      STRIDER_RETURN_IF_ERROR(impl->session_for(ordered).status());
    }
    if (impl->inputs.empty() || all_static(impl->inputs)) {  // one shape only: plan it now
      std::vector<Shape> shapes;
      for (const ValueInfo& info : impl->inputs) shapes.push_back(info.shape);
      STRIDER_RETURN_IF_ERROR(impl->session_for(shapes).status());
    }
    return std::unique_ptr<DynamicSession>(new DynamicSession(std::move(impl)));
  });
}

Result<std::vector<std::unique_ptr<DynamicSession>>> DynamicSession::load_instances(const std::string& model_path,
                                                                                   const SessionOptions& options,
                                                                                   int count, const Options& dynamic) {
  if (count < 1) return invalid_argument(fmt::format("{} instances: give 1 or more", count));
  std::vector<std::unique_ptr<DynamicSession>> instances;
  STRIDER_ASSIGN_OR_RETURN(std::unique_ptr<DynamicSession> first, load(model_path, options, dynamic));
  const Impl& model = *first->impl_;
  instances.push_back(std::move(first));
  for (int k = 1; k < count; ++k) {
    Result<std::unique_ptr<DynamicSession>> instance = guard("loading an instance", [&]() -> Result<std::unique_ptr<DynamicSession>> {
      auto impl = std::make_unique<Impl>();
      impl->graph = model.graph;  // a copy that shares the weights' host tensors
      impl->options = model.options;
      impl->plan_options = model.plan_options;
      impl->dynamic = model.dynamic;
      impl->inputs = model.inputs;
      impl->outputs = model.outputs;
      // Its own device (queues, arenas, budget for them); the first one's device copies of
      // the weights, which its budget already counts.
      STRIDER_ASSIGN_OR_RETURN(impl->resources, make_session_resources(impl->options));
      impl->resources->constants = model.resources->constants;
      impl->resources->host_constants = model.resources->host_constants;
      impl->resources->bf16_constants = model.resources->bf16_constants;
      impl->resources->merged_weights = model.resources->merged_weights;
      STRIDER_RETURN_IF_ERROR(impl->plan_like(model));
      return std::unique_ptr<DynamicSession>(new DynamicSession(std::move(impl)));
    });
    if (!instance.is_ok()) return instance.status().with_context(fmt::format("instance {} of {}", k, count));
    instances.push_back(std::move(*instance));
  }
  return instances;
}

const std::vector<ValueInfo>& DynamicSession::inputs() const { return impl_->inputs; }
const std::vector<ValueInfo>& DynamicSession::outputs() const { return impl_->outputs; }

Result<std::vector<Tensor>> DynamicSession::run(const std::map<std::string, Tensor>& inputs) {
  return guard("run", [&]() -> Result<std::vector<Tensor>> {
    std::lock_guard lock(impl_->mutex);
    std::map<std::string, Shape> given;
    for (const auto& [name, tensor] : inputs) {
      given[name] = tensor.shape();
      for (const ValueInfo& info : impl_->inputs)  // before planning: a wrong dtype plans nothing
        if (info.name == name && info.dtype != tensor.dtype())
          return invalid_argument(fmt::format("input '{}': got {}, expected {}", printable(name),
                                              dtype_name(tensor.dtype()), dtype_name(info.dtype)));
    }
    STRIDER_ASSIGN_OR_RETURN(std::vector<Shape> shapes, impl_->shapes_of(given));
    STRIDER_ASSIGN_OR_RETURN(Session * session, impl_->session_for(shapes));
    return session->run(inputs);
  });
}

Status DynamicSession::run(IoBinding& binding) {
  return guard("run", [&]() -> Status {
    std::lock_guard lock(impl_->mutex);
    std::map<std::string, Shape> given;
    for (const auto& [name, memory] : binding.inputs()) {
      given[name] = memory.shape;
      for (const ValueInfo& info : impl_->inputs)  // before planning: a wrong dtype plans nothing
        if (info.name == name && info.dtype != memory.dtype)
          return invalid_argument(fmt::format("input '{}': bound {}, expected {}", printable(name),
                                              dtype_name(memory.dtype), dtype_name(info.dtype)));
    }
    STRIDER_ASSIGN_OR_RETURN(std::vector<Shape> shapes, impl_->shapes_of(given));
    STRIDER_ASSIGN_OR_RETURN(Session * session, impl_->session_for(shapes));
    return session->run(binding);
  });
}

Status DynamicSession::prepare(const std::map<std::string, Shape>& input_shapes) {
  return guard("preparing a shape", [&]() -> Status {
    std::lock_guard lock(impl_->mutex);
    STRIDER_ASSIGN_OR_RETURN(std::vector<Shape> shapes, impl_->shapes_of(input_shapes));
    return impl_->session_for(shapes).status();
  });
}

int64_t DynamicSession::plans_made() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->plans_made;
}

int DynamicSession::cached_shapes() const {
  std::lock_guard lock(impl_->mutex);
  return int(impl_->cache.size());
}

std::vector<const void*> bound_addresses(const DynamicSession& session) {
  std::lock_guard lock(session.impl_->mutex);
  if (session.impl_->cache.empty()) return {};
  return bound_addresses(*session.impl_->cache.front().session);
}

int64_t DynamicSession::constant_uploads() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->resources->constants->uploads();
}

Result<HostBuffer> DynamicSession::allocate_host_buffer(size_t bytes) {
  return impl_->resources->device->allocate_host(bytes);  // the device is thread-safe here
}

int64_t DynamicSession::device_memory_bytes() const {
  const MemoryBudget* budget = impl_->resources->device->memory_budget();  // atomic: no lock
  return budget ? budget->used() : 0;
}

}  // namespace strider
