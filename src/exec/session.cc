#include "strider/session.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <map>

#include "exec/session_internal.h"
#include "hal/device.h"
#include "onnx/importer.h"
#include "passes/infer_shapes.h"
#include "passes/lower_precision.h"

namespace strider {

struct Session::Impl {
  SessionOptions options;
  Graph graph;                              // as planned (Materialize nodes included)
  std::vector<ValueInfo> inputs, outputs;   // as the caller sees them
  std::unique_ptr<Device> device;
  Plan plan;
  std::vector<std::unique_ptr<Kernel>> kernels;  // per plan step; null where nothing runs

  Status plan_and_create_kernels(const Graph& prepared, PlanOptions plan_options);
  Status upload_inputs(const std::vector<Tensor>& given);
  void poison();
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
    auto kernel = device.create_kernel(KernelRequest{graph, node, step.inputs, step.outputs});
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

Status Session::Impl::upload_inputs(const std::vector<Tensor>& given) {
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
  // Only once every input is known good does anything get written.
  for (size_t i = 0; i < converted.size(); ++i)
    STRIDER_RETURN_IF_ERROR(device->upload(converted[i], plan.view(graph.inputs()[i])));
  return Status::ok();
}

// Fills every value that kernels write with NaN (floats) or 0xA5 bytes.
void Session::Impl::poison() {
  for (ValueId id = 0; id < graph.num_values(); ++id) {
    const auto& planned = plan.values[size_t(id)];
    if (!planned || planned->role == ValueRole::kView || graph.value(id).is_constant()) continue;
    const TensorView& view = planned->view;
    Tensor pattern(view.dtype, view.sizes);
    if (is_floating(view.dtype)) {
      Tensor nan(DType::kF32, view.sizes);
      std::fill_n(nan.data<float>(), nan.num_elements(), std::numeric_limits<float>::quiet_NaN());
      pattern = *convert_float_tensor(nan, view.dtype);
    } else {
      std::memset(pattern.bytes(), 0xA5, pattern.byte_size());
    }
    (void)device->upload(pattern, view);
  }
}

Result<std::vector<Tensor>> Session::Impl::run(const std::vector<Tensor>& given) {
  if (options.poison_memory) poison();
  STRIDER_RETURN_IF_ERROR(upload_inputs(given));
  for (size_t s = 0; s < kernels.size(); ++s) {
    if (!kernels[s]) continue;
    Status status = kernels[s]->run();
    if (!status.is_ok()) {
      const Node& node = graph.node(plan.steps[s].node);
      return status.with_context(fmt::format("running node '{}' ({})", node.name, node.op_type));
    }
  }
  std::vector<Tensor> results;
  for (size_t i = 0; i < outputs.size(); ++i) {
    Tensor value;
    STRIDER_RETURN_IF_ERROR(device->download(plan.view(graph.outputs()[i]), &value));
    STRIDER_ASSIGN_OR_RETURN(Tensor converted, convert_float_tensor(value, outputs[i].dtype));
    results.push_back(std::move(converted));
  }
  return results;
}

Result<std::unique_ptr<Session>> create_session(Graph graph, const SessionOptions& options,
                                                const PlanOptions& plan_options) {
  if (options.dtype != DType::kF32 && options.dtype != DType::kBF16)
    return invalid_argument(fmt::format("--dtype {} is not supported; use f32 or bf16", dtype_name(options.dtype)));
  auto impl = std::make_unique<Session::Impl>();
  impl->options = options;
  STRIDER_RETURN_IF_ERROR(check_ops_known(graph));
  STRIDER_RETURN_IF_ERROR(bind_constant_inputs(graph, options));
  STRIDER_RETURN_IF_ERROR(resolve_input_shapes(graph, options));
  STRIDER_ASSIGN_OR_RETURN(impl->device, create_device(options.device));
  STRIDER_RETURN_IF_ERROR(infer_and_fold(graph));
  impl->inputs = describe(graph, graph.inputs());
  impl->outputs = describe(graph, graph.outputs());
  if (options.dtype == DType::kBF16) STRIDER_RETURN_IF_ERROR(lower_to_bf16(graph));
  STRIDER_RETURN_IF_ERROR(impl->plan_and_create_kernels(graph, plan_options));
  return std::make_unique<Session>(std::move(impl));
}

Result<std::unique_ptr<Session>> create_session(Graph graph, const SessionOptions& options) {
  std::optional<LayoutChoice> layout = parse_layout(options.layout);
  if (!layout) return invalid_argument(fmt::format("layout '{}' is not nchw, nhwc or auto", options.layout));
  PlanOptions plan_options;
  plan_options.layout = *layout;
  return create_session(std::move(graph), options, plan_options);
}

SessionPlanView inspect_session(const Session& session) {
  const Session::Impl& impl = session.impl();
  SessionPlanView view{&impl.graph, &impl.plan, {}};
  for (const auto& kernel : impl.kernels) view.kernel_names.push_back(kernel ? kernel->implementation() : "");
  return view;
}

Session::Session(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Session::~Session() {
  // Kernels hold views of the plan's allocations: drop them first.
  if (impl_) impl_->kernels.clear();
}

Result<std::unique_ptr<Session>> Session::load(const std::string& model_path, const SessionOptions& options) {
  STRIDER_ASSIGN_OR_RETURN(Graph graph, import_model_file(model_path));
  return create_session(std::move(graph), options);
}

const std::vector<ValueInfo>& Session::inputs() const { return impl_->inputs; }
const std::vector<ValueInfo>& Session::outputs() const { return impl_->outputs; }

Result<std::vector<Tensor>> Session::run(const std::vector<Tensor>& inputs) { return impl_->run(inputs); }

Result<std::vector<Tensor>> Session::run(const std::map<std::string, Tensor>& inputs) {
  std::vector<Tensor> ordered;
  for (const ValueInfo& info : impl_->inputs) {
    auto it = inputs.find(info.name);
    if (it == inputs.end()) return invalid_argument(fmt::format("missing input '{}'", info.name));
    ordered.push_back(it->second);
  }
  for (const auto& [name, tensor] : inputs) {
    bool known = std::any_of(impl_->inputs.begin(), impl_->inputs.end(), [&](const ValueInfo& i) { return i.name == name; });
    if (!known) return invalid_argument(fmt::format("'{}' is not an input of the model", name));
  }
  return impl_->run(ordered);
}

}  // namespace strider
