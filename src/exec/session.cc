#include "strider/session.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <cstdlib>

#include "base/checked_math.h"
#include "base/exception_guard.h"
#include "base/printable.h"
#include "exec/executor.h"
#include "exec/session_internal.h"
#include "hal/device.h"
#include "onnx/importer.h"
#include "passes/expand_functions.h"
#include "passes/fuse_attention.h"
#include "passes/fuse_elementwise.h"
#include "passes/infer_shapes.h"
#include "passes/lower_precision.h"
#include "ops/fused_attention.h"
#include "ops/fused_elementwise.h"
#include "ops/signature.h"

namespace strider {

struct Session::Impl {
  SessionOptions options;
  // The session's host allocations (constants, folded constants) and, on the CPU devices,
  // the device's too: one budget, since they are the same memory.
  std::shared_ptr<MemoryBudget> budget;
  Graph graph;                              // as planned (Materialize nodes included)
  std::vector<ValueInfo> inputs, outputs;   // as the caller sees them
  std::unique_ptr<Device> device;
  Plan plan;
  std::vector<std::unique_ptr<Kernel>> kernels;  // per plan step; null where nothing runs
  std::unique_ptr<Executor> executor;
  std::mutex running;  // run() is not reentrant: concurrent calls take turns

  Status plan_and_create_kernels(const Graph& prepared, PlanOptions plan_options);
  Result<std::vector<Tensor>> check_inputs(const std::vector<Tensor>& given) const;
  Result<std::vector<Tensor>> run(const std::vector<Tensor>& given);
};

namespace {

std::vector<ValueInfo> describe(const Graph& graph, const std::vector<ValueId>& ids) {
  std::vector<ValueInfo> infos;
  for (ValueId id : ids) infos.push_back({graph.value(id).name, graph.value(id).dtype, graph.value(id).shape});
  return infos;
}

bool all_packed(const PlanStep& step) {
  for (const auto* views : {&step.inputs, &step.outputs})
    for (const TensorView& v : *views)
      if (v.allocation && !is_packed(v)) return false;
  return true;
}

struct KernelAttempt {
  std::vector<std::unique_ptr<Kernel>> kernels;
  std::string refused_node;  // a node that refused non-packed operands, to plan densely
};

// Creates every step's kernel. Unsupported nodes are listed together in one error.
Result<KernelAttempt> create_kernels(const Graph& graph, const Plan& plan, Device& device) {
  KernelAttempt attempt;
  std::map<std::string, std::vector<std::string>> unsupported_nodes;
  std::string first_message;
  for (const PlanStep& step : plan.steps) {
    if (step.kind == StepKind::kView) {
      attempt.kernels.emplace_back();
      continue;
    }
    const Node& node = graph.node(step.node);
    KernelRequest request{graph, node, step.inputs, step.outputs};
    STRIDER_RETURN_IF_ERROR(check_kernel_views(request));
    if (all_outputs_empty(request)) {
      attempt.kernels.push_back(std::make_unique<EmptyOutputsKernel>());
      continue;
    }
    auto kernel = device.create_kernel(request);
    if (kernel.is_ok()) {
      attempt.kernels.push_back(std::move(kernel).value());
      continue;
    }
    if (kernel.status().code() != StatusCode::kUnsupported) return kernel.status();
    if (!all_packed(step)) {  // the planner can avoid this: try again with packed operands
      attempt.refused_node = node.name;
      return attempt;
    }
    if (first_message.empty()) first_message = kernel.status().message();
    unsupported_nodes[node.op_type].push_back(node.name);
  }
  if (unsupported_nodes.empty()) return attempt;
  std::string list;
  for (const auto& [op, nodes] : unsupported_nodes)
    list += fmt::format("{}{} ({} node{})", list.empty() ? "" : ", ", op, nodes.size(), nodes.size() > 1 ? "s" : "");
  return unsupported(fmt::format("{} cannot run {}; first: {}", device.name(), list, first_message));
}

}  // namespace

// Plans, then creates the kernels for the planned views. A kernel that refuses the views
// it was planned with (not packed) gets its node planned densely, and the planner runs
// again: an optimization a kernel cannot honour is simply not made.
Status Session::Impl::plan_and_create_kernels(const Graph& prepared, PlanOptions plan_options) {
  for (int attempt = 0; attempt <= prepared.num_nodes(); ++attempt) {
    graph = prepared;
    kernels.clear();
    plan = Plan();
    STRIDER_ASSIGN_OR_RETURN(plan, make_plan(graph, *device, plan_options));
    STRIDER_ASSIGN_OR_RETURN(KernelAttempt made, create_kernels(graph, plan, *device));
    if (made.refused_node.empty()) {
      kernels = std::move(made.kernels);
      return Status::ok();
    }
    if (!plan_options.dense_nodes.insert(made.refused_node).second)
      return internal_error(fmt::format("node '{}' refused its packed operands", made.refused_node));
  }
  return internal_error("planning did not converge");
}

// Checks every input and converts it to the plan's dtype; nothing is written until all
// are known good.
Result<std::vector<Tensor>> Session::Impl::check_inputs(const std::vector<Tensor>& given) const {
  if (given.size() != inputs.size())
    return invalid_argument(fmt::format("got {} inputs, the model takes {}", given.size(), inputs.size()));
  std::vector<Tensor> converted;
  for (size_t i = 0; i < given.size(); ++i) {
    const ValueInfo& info = inputs[i];
    const Tensor& t = given[i];
    if (t.dtype() != info.dtype)
      return invalid_argument(fmt::format("input '{}': got {}, expected {}", info.name, dtype_name(t.dtype()),
                                          dtype_name(info.dtype)));
    if (t.rank() != int64_t(info.shape.size()))
      return invalid_argument(fmt::format("input '{}': got rank {} ({}), expected rank {} ({})", info.name,
                                          t.rank(), shape_to_dims(t.shape()), info.shape.size(),
                                          shape_to_dims(info.shape)));
    for (size_t d = 0; d < info.shape.size(); ++d)
      if (t.shape()[d] != info.shape[d])
        return invalid_argument(fmt::format("input '{}' dim {}: got {}, expected {}", info.name, d,
                                            t.shape()[d], info.shape[d]));
    STRIDER_ASSIGN_OR_RETURN(Tensor value, convert_float_tensor(t, plan.view(graph.inputs()[i]).dtype));
    converted.push_back(std::move(value));
  }
  return converted;
}

Result<std::vector<Tensor>> Session::Impl::run(const std::vector<Tensor>& given) {
  std::lock_guard lock(running);
  STRIDER_ASSIGN_OR_RETURN(std::vector<Tensor> converted, check_inputs(given));
  STRIDER_ASSIGN_OR_RETURN(std::vector<Tensor> values, executor->run(converted));
  std::vector<Tensor> results;
  for (size_t i = 0; i < values.size(); ++i) {
    STRIDER_ASSIGN_OR_RETURN(Tensor converted_output, convert_float_tensor(values[i], outputs[i].dtype));
    results.push_back(std::move(converted_output));
  }
  return results;
}

// Empty is device; an unknown name lists the valid ones. (The library reads no environment
// variables: the CLI maps STRIDER_STORAGE_MODE onto the option.)
Result<StorageMode> resolve_storage_mode(const std::string& option) {
  const std::string name = option.empty() ? "device" : option;
  for (StorageMode mode : {StorageMode::kDevice, StorageMode::kUnified, StorageMode::kHost})
    if (name == storage_mode_name(mode)) return mode;
  return invalid_argument(fmt::format("storage mode '{}' is not one of device, unified, host", printable(name)));
}

namespace {

// The model's constants (initializers, Constant values) are host memory the session holds.
Status reserve_constants(const Graph& graph, MemoryBudget& budget) {
  int64_t bytes = 0;
  for (ValueId id = 0; id < graph.num_values(); ++id)
    if (graph.value(id).is_constant()) bytes += int64_t(graph.value(id).constant->byte_size());
  return budget.reserve(bytes, "the model's constants");
}

Result<std::unique_ptr<Session>> create_session_unguarded(Graph graph, const SessionOptions& options,
                                                          const PlanOptions& plan_options) {
  if (options.dtype != DType::kF32 && options.dtype != DType::kBF16)
    return invalid_argument(fmt::format("--dtype {} is not supported; use f32 or bf16", dtype_name(options.dtype)));
  if (options.max_memory_bytes < 0)
    return invalid_argument(fmt::format("max_memory_bytes {} is negative", options.max_memory_bytes));
  auto impl = std::make_unique<Session::Impl>();
  impl->options = options;
  impl->budget = std::make_shared<MemoryBudget>(options.max_memory_bytes > 0 ? options.max_memory_bytes
                                                                             : default_host_memory_budget());
  STRIDER_RETURN_IF_ERROR(check_model_opsets(graph));
  STRIDER_RETURN_IF_ERROR(check_ops_known(graph));
  STRIDER_RETURN_IF_ERROR(bind_constant_inputs(graph, options));
  STRIDER_RETURN_IF_ERROR(resolve_input_shapes(graph, options));
  STRIDER_RETURN_IF_ERROR(reserve_constants(graph, *impl->budget));
  DeviceOptions device_options;
  device_options.queues = options.queues;
  device_options.sim_seed = options.sim_seed;
  device_options.allow_tf32 = options.allow_tf32;
  bool cuda = options.device.rfind("cuda", 0) == 0;
  // A GPU's memory is its own: there the budget bounds it only when the caller set one.
  if (!cuda) device_options.budget = impl->budget;
  else if (options.max_memory_bytes > 0) device_options.budget = std::make_shared<MemoryBudget>(options.max_memory_bytes);
  STRIDER_ASSIGN_OR_RETURN(device_options.storage_mode, resolve_storage_mode(options.storage_mode));
  STRIDER_ASSIGN_OR_RETURN(impl->device, create_device(options.device, device_options));
  STRIDER_RETURN_IF_ERROR(infer_and_fold(graph, impl->budget.get()));
  STRIDER_ASSIGN_OR_RETURN(int expanded, expand_functions(graph, impl->budget.get()));
  if (expanded > 0) STRIDER_RETURN_IF_ERROR(infer_and_fold(graph, impl->budget.get()));  // types the bodies' values
  impl->inputs = describe(graph, graph.inputs());
  impl->outputs = describe(graph, graph.outputs());
  if (options.dtype == DType::kBF16) STRIDER_RETURN_IF_ERROR(lower_to_bf16(graph));
  if (options.fusion && impl->device->has_kernel(kFusedAttentionOp) && impl->device->fuses_attention())
    STRIDER_RETURN_IF_ERROR(fuse_attention(graph).status());
  if (options.fusion && impl->device->has_kernel(kFusedElementwiseOp))
    STRIDER_RETURN_IF_ERROR(fuse_elementwise(graph).status());
  if (options.fusion && impl->device->has_kernel(kFusedConvOp))
    STRIDER_RETURN_IF_ERROR(fuse_conv_activations(graph).status());
  STRIDER_RETURN_IF_ERROR(impl->plan_and_create_kernels(graph, plan_options));
  ExecutorOptions executor_options;
  executor_options.sanitize = options.sanitize;
  executor_options.drop_waits = options.debug_drop_waits;
  executor_options.poison = options.poison_memory || impl->device->poisons_memory();
  executor_options.graphs = options.cuda_graph;
  impl->executor =
      std::make_unique<Executor>(impl->graph, impl->plan, impl->kernels, *impl->device, executor_options);
  return std::make_unique<Session>(std::move(impl));
}

}  // namespace

Result<std::unique_ptr<Session>> create_session(Graph graph, const SessionOptions& options,
                                                const PlanOptions& plan_options) {
  return guard("creating the session",
               [&] { return create_session_unguarded(std::move(graph), options, plan_options); });
}

Result<std::unique_ptr<Session>> create_session(Graph graph, const SessionOptions& options) {
  std::optional<LayoutChoice> layout = parse_layout(options.layout);
  if (!layout) return invalid_argument(fmt::format("layout '{}' is not nchw, nhwc or auto", options.layout));
  PlanOptions plan_options;
  plan_options.layout = *layout;
  return create_session(std::move(graph), options, plan_options);
}

Result<double> time_device_steps(Session& session) { return session.impl().executor->time_steps(); }

Result<std::vector<TappedValue>> run_with_taps(Session& session, const std::vector<Tensor>& inputs) {
  Session::Impl& impl = session.impl();
  std::lock_guard lock(impl.running);
  STRIDER_ASSIGN_OR_RETURN(std::vector<Tensor> converted, impl.check_inputs(inputs));
  std::map<ValueId, Tensor> taps;
  STRIDER_RETURN_IF_ERROR(impl.executor->run(converted, &taps).status());
  std::vector<TappedValue> ordered;
  for (const PlanStep& step : impl.plan.steps) {
    const Node& node = impl.graph.node(step.node);
    for (ValueId id : node.outputs) {
      auto tap = taps.find(id);
      if (tap == taps.end()) continue;
      std::string op = node.op_type;
      if (auto members = node.attributes.get_string("nodes", ""); node.domain == "strider" && members.is_ok() && !members->empty())
        op += " of " + *members;  // a fused group names the nodes it replaced
      ordered.push_back({impl.graph.value(id).name, node.name, op, std::move(tap->second)});
    }
  }
  return ordered;
}

SessionPlanView inspect_session(const Session& session) {
  const Session::Impl& impl = session.impl();
  SessionPlanView view{&impl.graph, &impl.plan, {}};
  for (const auto& kernel : impl.kernels) view.kernel_names.push_back(kernel ? kernel->implementation() : "");
  view.queue_of_step = impl.executor->queue_of_step();
  view.uses_graph = impl.executor->uses_graph();
  return view;
}

Session::Session(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Session::~Session() {
  if (!impl_) return;
  // Let the queues finish before kernels and memory go: release is ordered after last use.
  (void)impl_->device->synchronize();
  impl_->executor.reset();
  impl_->kernels.clear();
}

Result<std::unique_ptr<Session>> Session::load(const std::string& model_path, const SessionOptions& options) {
  return guard("loading the model", [&]() -> Result<std::unique_ptr<Session>> {
    ImportOptions import_options;
    import_options.max_constant_bytes =
        options.max_memory_bytes > 0 ? options.max_memory_bytes : default_host_memory_budget();
    STRIDER_ASSIGN_OR_RETURN(Graph graph, import_model_file(model_path, import_options));
    return create_session(std::move(graph), options);
  });
}

const std::vector<ValueInfo>& Session::inputs() const { return impl_->inputs; }
const std::vector<ValueInfo>& Session::outputs() const { return impl_->outputs; }

Result<std::vector<Tensor>> Session::run(const std::vector<Tensor>& inputs) {
  return guard("run", [&] { return impl_->run(inputs); });
}

Result<std::vector<Tensor>> Session::run(const std::map<std::string, Tensor>& inputs) {
  return guard("run", [&]() -> Result<std::vector<Tensor>> {
    std::vector<Tensor> ordered;
    for (const ValueInfo& info : impl_->inputs) {
      auto it = inputs.find(info.name);
      if (it == inputs.end()) return invalid_argument(fmt::format("missing input '{}'", printable(info.name)));
      ordered.push_back(it->second);
    }
    for (const auto& entry : inputs) {
      bool known = std::any_of(impl_->inputs.begin(), impl_->inputs.end(),
                               [&](const ValueInfo& i) { return i.name == entry.first; });
      if (!known) return invalid_argument(fmt::format("'{}' is not an input of the model", printable(entry.first)));
    }
    return impl_->run(ordered);
  });
}

}  // namespace strider
