#include "strider/session.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <set>

#include "base/checked_math.h"
#include "base/exception_guard.h"
#include "strider/printable.h"
#include "exec/model_impl.h"
#include "exec/session_impl.h"
#include "exec/step_cost.h"
#include "passes/inline_control_flow.h"
#include "hal/device.h"
#include "onnx/importer.h"
#include "passes/expand_functions.h"
#include "passes/fuse_attention.h"
#include "passes/merge_sibling_matmuls.h"
#include "passes/split_rotary.h"
#include "passes/gemm_as_matmul.h"
#include "passes/group_maps.h"
#include "ops/fused_map_group.h"
#include "passes/fuse_conv_chain.h"
#include "passes/fuse_normalization.h"
#include "passes/fuse_elementwise.h"
#include "passes/fuse_gated_conv.h"
#include "passes/fuse_gated_stack.h"
#include "passes/fuse_wavenet_layer.h"
#include "ops/gated_stack.h"
#include "passes/infer_shapes.h"
#include "passes/lower_precision.h"
#include "ops/conv_chain.h"
#include "ops/fused_attention.h"
#include "ops/fused_elementwise.h"
#include "ops/op_registry.h"
#include "ops/signature.h"
#include "plan/bind.h"

namespace strider {

namespace {

// Values after a split are not inferred yet: their dtype is the model's declared one, if
// any, and their shape has -1 for every dim (or no dims, when even the rank is unknown).
std::vector<ValueInfo> describe(const Graph& graph, const std::vector<ValueId>& ids) {
  std::vector<ValueInfo> infos;
  for (ValueId id : ids) {
    const Value& v = graph.value(id);
    ValueInfo info{v.name, v.dtype, v.shape};
    if (!v.has_shape) {
      auto declared = std::find_if(graph.declared_outputs().begin(), graph.declared_outputs().end(),
                                   [&](const Value& d) { return d.name == v.name; });
      if (!v.has_type && declared != graph.declared_outputs().end() && declared->has_type) info.dtype = declared->dtype;
      info.shape = declared != graph.declared_outputs().end() && declared->has_shape ? declared->shape : Shape{};
      std::fill(info.shape.begin(), info.shape.end(), -1);
    }
    infos.push_back(std::move(info));
  }
  return infos;
}

bool all_packed(const PlanStep& step) {
  for (const auto* views : {&step.inputs, &step.outputs})
    for (const TensorView& v : *views)
      if (v.allocation && !is_packed(v)) return false;
  return true;
}

}  // namespace

// Creates every step's kernel, in one sweep: every node that refuses its non-packed views
// is collected (so one more plan serves them all), and unsupported nodes are listed
// together in one error.
Result<KernelAttempt> create_kernels(const Graph& graph, const Plan& plan, Device& device,
                                     RefusedNode* first_unsupported) {
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
    attempt.kernels.emplace_back();
    if (kernel.status().code() != StatusCode::kUnsupported) return kernel.status();
    if (!all_packed(step)) {  // the planner can avoid this: plan the node with packed operands
      attempt.refused_nodes.insert(node.name);
      continue;
    }
    if (first_message.empty()) {
      first_message = kernel.status().message();
      if (first_unsupported) *first_unsupported = {node.name, first_message};
    }
    unsupported_nodes[node.op_type].push_back(node.name);
  }
  if (unsupported_nodes.empty()) return attempt;
  std::string list;
  for (const auto& [op, nodes] : unsupported_nodes)
    list += fmt::format("{}{} ({} node{})", list.empty() ? "" : ", ", op, nodes.size(), nodes.size() > 1 ? "s" : "");
  return unsupported(fmt::format("{} cannot run {}; first: {}", device.name(), list, first_message));
}


// Plans (pure), binds, then creates the kernels for the bound views. The kernels that
// refuse the views they were planned with (not packed) get their nodes planned densely,
// all at once, and the planner runs again: an optimization a kernel cannot honour is
// simply not made. Constants are uploaded once, whatever the number of rounds (the
// device-constant store keeps what the previous round's binding uploaded).
Status Session::Impl::plan_and_create_kernels(const Graph& prepared, PlanOptions plan_options,
                                              RefusedNode* first_unsupported) {
  const DeviceCapabilities capabilities = capabilities_of(*device);
  for (int round = 0; round <= prepared.num_nodes(); ++round) {
    kernels.clear();
    bound = BoundPlan();
    STRIDER_ASSIGN_OR_RETURN(PlannedGraph planned, make_plan(prepared, capabilities, plan_options));
    graph = std::move(planned.graph);
    plan = std::move(planned.plan);
    STRIDER_ASSIGN_OR_RETURN(bound, bind_plan(plan, graph, *device, *resources->constants));
    STRIDER_ASSIGN_OR_RETURN(KernelAttempt made, create_kernels(graph, bound.plan, *device, first_unsupported));
    if (made.refused_nodes.empty()) {
      kernels = std::move(made.kernels);
      return Status::ok();
    }
    for (const std::string& node : made.refused_nodes)
      if (!plan_options.dense_nodes.insert(node).second)
        return internal_error(fmt::format("node '{}' refused its packed operands", node));
  }
  return internal_error("planning did not converge");
}

ExecutorOptions Session::Impl::executor_options() const {
  ExecutorOptions o;
  o.sanitize = options.sanitize;
  o.drop_waits = debug.drop_waits;
  o.poison = options.poison_memory || device->poisons_memory();
  o.graphs = options.cuda_graph;
  return o;
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
    const DType planned = staged ? t.dtype() : bound.plan.view(graph.inputs()[i]).dtype;
    if (planned == t.dtype()) {  // a view of the caller's bytes, read only by the upload
      STRIDER_ASSIGN_OR_RETURN(Tensor view, Tensor::borrow(t.dtype(), t.shape(), const_cast<std::byte*>(t.bytes()),
                                                           t.byte_size()));
      converted.push_back(std::move(view));
      continue;
    }
    STRIDER_ASSIGN_OR_RETURN(Tensor value, convert_float_tensor(t, planned));
    converted.push_back(std::move(value));
  }
  return converted;
}

Status Session::Impl::check_outputs(const std::vector<Tensor>& given) const {
  if (given.size() != outputs.size())
    return invalid_argument(fmt::format("got {} output tensors, the model has {} outputs", given.size(), outputs.size()));
  for (size_t i = 0; i < given.size(); ++i) {
    const ValueInfo& info = outputs[i];
    const Shape& shape = bound.plan.view(graph.outputs()[i]).sizes;
    if (!given[i].has_layout(info.dtype, shape))
      return invalid_argument(fmt::format("output '{}': got a tensor {}{}, the run makes {}{}", printable(info.name),
                                          dtype_name(given[i].dtype()), shape_to_string(given[i].shape()),
                                          dtype_name(info.dtype), shape_to_string(shape)));
  }
  return Status::ok();
}

// Outputs computed in the model's dtype are downloaded straight into the result (the
// caller's tensor or a new one); a bf16 session's f32 outputs go through a conversion.
Status Session::Impl::run_into(const std::vector<Tensor>& given, std::vector<Tensor>& results, bool into_caller) {
  std::lock_guard lock(running);
  STRIDER_ASSIGN_OR_RETURN(std::vector<Tensor> converted, check_inputs(given));
  if (staged) return run_split(converted, results, into_caller);
  if (into_caller) STRIDER_RETURN_IF_ERROR(check_outputs(results));
  else results.assign(outputs.size(), Tensor());
  std::vector<Tensor> staged(outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (!into_caller || bound.plan.view(graph.outputs()[i]).dtype != outputs[i].dtype) continue;
    STRIDER_ASSIGN_OR_RETURN(staged[i], Tensor::borrow(results[i].dtype(), results[i].shape(), results[i].bytes(),
                                                       results[i].byte_size()));
  }
  STRIDER_RETURN_IF_ERROR(executor->run_into(converted, staged, nullptr));
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (staged[i].dtype() == outputs[i].dtype) {
      if (!into_caller) results[i] = std::move(staged[i]);
      continue;
    }
    STRIDER_ASSIGN_OR_RETURN(Tensor value, convert_float_tensor(staged[i], outputs[i].dtype));
    if (!into_caller) results[i] = std::move(value);
    else if (value.byte_size() > 0) std::memcpy(results[i].bytes(), value.bytes(), value.byte_size());  // empty: null bytes()
  }
  return Status::ok();
}

// The outputs' shapes are known only once the run has computed them: a caller's tensor
// must match what came out, and is written only after every output is known.
Status Session::Impl::run_split(const std::vector<Tensor>& inputs, std::vector<Tensor>& results, bool into_caller) {
  STRIDER_ASSIGN_OR_RETURN(std::vector<Tensor> computed, staged->run(inputs));
  if (!into_caller) {
    results = std::move(computed);
    return Status::ok();
  }
  if (results.size() != computed.size())
    return invalid_argument(fmt::format("got {} output tensors, the model has {} outputs", results.size(), computed.size()));
  for (size_t i = 0; i < computed.size(); ++i)
    if (!results[i].has_layout(computed[i].dtype(), computed[i].shape()))
      return invalid_argument(fmt::format("output '{}': got a tensor {}{}, the run made {}{}", printable(outputs[i].name),
                                          dtype_name(results[i].dtype()), shape_to_string(results[i].shape()),
                                          dtype_name(computed[i].dtype()), shape_to_string(computed[i].shape())));
  for (size_t i = 0; i < computed.size(); ++i)
    if (computed[i].byte_size() > 0) std::memcpy(results[i].bytes(), computed[i].bytes(), computed[i].byte_size());
  return Status::ok();
}

namespace {

// The model's constants (initializers, Constant values) are host memory the session holds,
// except those its resources already hold for every session (a DynamicSession's weights).
Status reserve_constants(const Graph& graph, const SessionResources& resources, MemoryBudget& budget) {
  int64_t bytes = 0;
  for (ValueId id = 0; id < graph.num_values(); ++id) {
    const Value& v = graph.value(id);
    if (v.is_constant() && !resources.host_constants.count(v.constant.get())) bytes += int64_t(v.constant->byte_size());
  }
  return budget.reserve(bytes, "the model's constants");
}

Status check_session_options(const SessionOptions& options) {
  if (options.dtype != DType::kF32 && options.dtype != DType::kBF16)
    return invalid_argument(fmt::format("--dtype {} is not supported; use f32 or bf16", dtype_name(options.dtype)));
  if (options.threads < 0) return invalid_argument(fmt::format("threads {} is negative", options.threads));
  if (options.max_memory_bytes < 0)
    return invalid_argument(fmt::format("max_memory_bytes {} is negative", options.max_memory_bytes));
  return Status::ok();
}

// Shape inference with constant folding, and function bodies expanded; or, when inference
// stops at a node whose output shape depends on values, that node in *split.
Status prepare_graph(Graph& graph, MemoryBudget* budget, NodeId* split) {
  STRIDER_RETURN_IF_ERROR(infer_and_fold(graph, budget, split));
  if (*split != kNoNode) return Status::ok();
  // A body may hold an op that expands in turn (Col2Im's ConvTranspose): repeat, inferring
  // the new values' types each time, until nothing expands (bodies nest at most 4 deep).
  for (int depth = 0; depth < 4; ++depth) {
    STRIDER_ASSIGN_OR_RETURN(int expanded, expand_functions(graph, budget));
    if (expanded == 0) return Status::ok();
    STRIDER_RETURN_IF_ERROR(infer_and_fold(graph, budget));  // types the bodies' values
  }
  return internal_error("function bodies still expand after 4 rounds");
}

// Precision, then the fusions the device has kernels for (and, for attention, is faster with).
// Siblings merge first, so that a merged product is what takes its epilogue.
Status lower_and_fuse(Graph& graph, const SessionOptions& options, const Device& device, SessionResources& resources) {
  LoweredConstants& bf16_constants = *resources.bf16_constants;
  if (options.dtype == DType::kBF16) STRIDER_RETURN_IF_ERROR(lower_to_bf16(graph, &bf16_constants));
  if (options.fusion && device.merges_sibling_matmuls())
    STRIDER_RETURN_IF_ERROR(merge_sibling_matmuls(graph, resources.merged_weights.get(),
                                                  [&bf16_constants](const std::shared_ptr<const Tensor>& t) {
                                                    return bf16_constants.source_of(t);
                                                  })
                                .status());
  if (options.fusion && device.rewrites_linear_gemms() && device.has_kernel(kFusedMatMulOp))
    STRIDER_RETURN_IF_ERROR(gemm_as_matmul(graph).status());  // its bias and activation then one epilogue
  if (options.fusion && device.has_kernel("RMSNormalization")) STRIDER_RETURN_IF_ERROR(fuse_rms_norm(graph).status());
  if (options.fusion && device.has_kernel(kFusedAttentionOp))
    STRIDER_RETURN_IF_ERROR(
        fuse_attention(graph, [&device](const AttentionShape& shape) { return device.fuses_attention(shape); }).status());
  if (options.fusion && device.has_kernel(kFusedElementwiseOp)) {
    STRIDER_RETURN_IF_ERROR(split_rotate_half(graph).status());  // each half then one map
    STRIDER_RETURN_IF_ERROR(fuse_elementwise(graph).status());
  }
  if (options.fusion && device.has_kernel(kFusedConvOp))
    STRIDER_RETURN_IF_ERROR(fuse_conv_activations(graph, device.fuses_conv_into_concat()).status());
  if (options.fusion && device.has_kernel(kFusedGatedConvOp)) {
    // Units a stack will take are fused as FusedGatedConv first (the stack pass folds those).
    // So are the gates of WaveNet layers the device fuses (the layer pass then folds those
    // with their projections; a gate it finds none for stays a FusedGatedConv).
    const bool stacks = device.has_kernel(kFusedGatedStackOp);
    const bool layers = device.has_kernel(kFusedWaveNetLayerOp);
    auto stacked = [&device, stacks](const GatedConvUnit& unit) { return stacks && device.fuses_gated_stack(unit); };
    auto layered = [&device, layers](const WaveNetLayerShape& shape) { return layers && device.fuses_wavenet_layer(shape); };
    STRIDER_RETURN_IF_ERROR(fuse_gated_convs(graph, [&](const GatedConvUnit& unit) {
                              return device.fuses_gated_conv(unit) || stacked(unit) ||
                                     layered({unit, true, unit.in_channels});
                            }).status());
    if (stacks) STRIDER_RETURN_IF_ERROR(fuse_gated_stacks(graph, stacked).status());
    if (layers) STRIDER_RETURN_IF_ERROR(fuse_wavenet_layers(graph, layered).status());
  }
  if (options.fusion && device.has_kernel(kFusedMatMulOp)) STRIDER_RETURN_IF_ERROR(fuse_matmul_epilogues(graph).status());
  if (options.fusion && device.has_kernel(kFusedPointwiseDepthwiseOp))
    STRIDER_RETURN_IF_ERROR(
        fuse_pointwise_depthwise(graph, [&device](int64_t bytes) { return device.fuses_pointwise_depthwise(bytes); })
            .status());
  // Last: it groups only the maps no epilogue took.
  if (options.fusion && device.has_kernel(kFusedMapGroupOp))
    STRIDER_RETURN_IF_ERROR(group_small_maps(graph, device.max_grouped_map_elements()).status());
  return Status::ok();
}

// The first node of `fused` (the graph as the device would run it) that the device
// declines, as its id in `unfused` (the same graph before precision lowering and fusion:
// a declined node was fused into nothing, so it keeps its name), with the device's reason.
// View ops run no kernel and are not asked about.
// Where a session's graph is split, and why (exec/staged_session.h).
struct Split {
  NodeId at = kNoNode;
  std::string why;
};

Result<std::unique_ptr<Session>> split_session(std::unique_ptr<Session::Impl> impl, const Graph& graph,
                                               const Split& split, const PlanOptions& plan_options) {
  STRIDER_ASSIGN_OR_RETURN(impl->staged,
                           StagedRun::create(graph, split.at, split.why, impl->options, plan_options, impl->resources));
  return SessionAccess::make(std::move(impl));
}

NodeId node_named(const Graph& graph, const std::string& name) {
  for (NodeId at = 0; at < graph.num_nodes(); ++at)
    if (!name.empty() && graph.node(at).name == name) return at;
  return kNoNode;
}

Split first_declined(const Graph& unfused, const Graph& fused, const Device& device) {
  for (NodeId id = 0; id < fused.num_nodes(); ++id) {
    const Node& node = fused.node(id);
    const OpSchema* schema = find_op_schema(node.domain, node.op_type);
    if (schema && schema->traits.view != ViewKind::kNone) continue;
    std::string why = device.declines(fused, node);
    if (why.empty()) continue;
    if (NodeId at = node_named(unfused, node.name); at != kNoNode) return {at, why};
  }
  return {};
}

Result<std::unique_ptr<Session>> create_session_unguarded(Graph graph, const SessionOptions& options,
                                                          const PlanOptions& plan_options,
                                                          std::shared_ptr<SessionResources> resources,
                                                          const SessionDebugOptions& debug) {
  STRIDER_RETURN_IF_ERROR(check_session_options(options));
  STRIDER_RETURN_IF_ERROR(check_model_opsets(graph));
  STRIDER_RETURN_IF_ERROR(check_ops_known(graph));
  STRIDER_RETURN_IF_ERROR(bind_constant_inputs(graph, options));
  STRIDER_RETURN_IF_ERROR(resolve_input_shapes(graph, options));
  if (!resources) {
    STRIDER_ASSIGN_OR_RETURN(resources, make_session_resources(options));
  }
  auto impl = std::make_unique<Session::Impl>();
  impl->options = options;
  impl->resources = resources;
  impl->device = resources->device;
  impl->budget = std::make_shared<MemoryBudget>(resources->budget->limit(), resources->budget);
  STRIDER_RETURN_IF_ERROR(reserve_constants(graph, *resources, *impl->budget));
  NodeId split = kNoNode;
  STRIDER_RETURN_IF_ERROR(prepare_graph(graph, impl->budget.get(), &split));
  impl->inputs = describe(graph, graph.inputs());
  impl->outputs = describe(graph, graph.outputs());
  impl->debug = debug;
  if (split != kNoNode) {
    const char* why = is_control_flow(graph.node(split)) ? "what it runs depends on its input values"
                                                         : "its output shape depends on its input values";
    return split_session(std::move(impl), graph, {split, why}, plan_options);
  }
  Graph unfused = graph;
  STRIDER_RETURN_IF_ERROR(lower_and_fuse(graph, options, *impl->device, *resources));
  if (Split declined = first_declined(unfused, graph, *impl->device); declined.at != kNoNode)
    return split_session(std::move(impl), unfused, declined, plan_options);
  RefusedNode refused;
  Status planned = impl->plan_and_create_kernels(graph, plan_options, &refused);
  // A kernel the device's capability query did not foresee (MatMul on f64 on cuda): split
  // at that node too, if the graph before fusion has it and the device is not the host.
  NodeId at = planned.code() == StatusCode::kUnsupported ? node_named(unfused, refused.node) : kNoNode;
  if (at != kNoNode && !impl->device->computes_on_host()) {
    impl->kernels.clear();
    impl->bound = BoundPlan();
    return split_session(std::move(impl), unfused, {at, refused.why}, plan_options);
  }
  STRIDER_RETURN_IF_ERROR(planned);
  impl->executor =
      std::make_unique<Executor>(impl->graph, impl->bound.plan, impl->kernels, *impl->device, impl->executor_options());
  return SessionAccess::make(std::move(impl));
}

}  // namespace

Result<std::shared_ptr<SessionResources>> make_session_resources(const SessionOptions& options) {
  STRIDER_RETURN_IF_ERROR(check_session_options(options));
  auto resources = std::make_shared<SessionResources>();
  resources->budget = std::make_shared<MemoryBudget>(options.max_memory_bytes > 0 ? options.max_memory_bytes
                                                                                : default_host_memory_budget());
  DeviceOptions device_options;
  device_options.queues = options.queues;
  device_options.threads = options.threads;
  device_options.share_process_cores = options.share_cores;
  device_options.sim_seed = options.sim_seed;
  device_options.allow_tf32 = options.allow_tf32;
  device_options.cpu_winograd = options.winograd;
  bool cuda = options.device.rfind("cuda", 0) == 0;
  // A GPU's memory is its own: there the budget bounds it only when the caller set one.
  if (!cuda) device_options.budget = resources->budget;
  else if (options.max_memory_bytes > 0) device_options.budget = std::make_shared<MemoryBudget>(options.max_memory_bytes);
  device_options.storage_mode = options.storage_mode;
  STRIDER_ASSIGN_OR_RETURN(std::unique_ptr<Device> device, create_device(options.device, device_options));
  resources->device = std::move(device);
  resources->constants = std::make_shared<DeviceConstants>(resources->device);
  return resources;
}

Result<std::unique_ptr<Session>> create_session(Graph graph, const SessionOptions& options,
                                                const PlanOptions& plan_options,
                                                std::shared_ptr<SessionResources> resources,
                                                const SessionDebugOptions& debug) {
  return guard("creating the session", [&] {
    return create_session_unguarded(std::move(graph), options, plan_options, std::move(resources), debug);
  });
}

Result<std::unique_ptr<Session>> create_session(Graph graph, const SessionOptions& options,
                                                const PlanOptions& plan_options) {
  return create_session(std::move(graph), options, plan_options, nullptr);
}

Result<PlanOptions> plan_options_for(const SessionOptions& options) {
  if (!parse_layout(layout_name(options.layout)))
    return invalid_argument(fmt::format("layout {} is not nchw, nhwc or auto", int(options.layout)));
  PlanOptions plan_options;
  plan_options.layout = options.layout;
  return plan_options;
}

Result<std::unique_ptr<Session>> create_session(Graph graph, const SessionOptions& options) {
  STRIDER_ASSIGN_OR_RETURN(PlanOptions plan_options, plan_options_for(options));
  return create_session(std::move(graph), options, plan_options);
}

namespace {
Status needs_one_plan(const Session::Impl& impl, std::string_view what) {
  if (!impl.staged) return Status::ok();
  return unsupported(fmt::format("{} needs one plan, and this model is split where a value decides a shape ({})", what,
                                 impl.staged->describe()[1]));
}
}  // namespace

Result<double> time_device_steps(Session& session) {
  Session::Impl& impl = SessionAccess::impl(session);
  STRIDER_RETURN_IF_ERROR(needs_one_plan(impl, "timing the device steps"));
  return impl.executor->time_steps();
}

Result<std::vector<StepTime>> time_each_step(Session& session) {
  Session::Impl& impl = SessionAccess::impl(session);
  STRIDER_RETURN_IF_ERROR(needs_one_plan(impl, "timing each step"));
  std::lock_guard lock(impl.running);
  STRIDER_ASSIGN_OR_RETURN(std::vector<double> ms, impl.executor->time_each_step());
  std::vector<StepTime> steps;
  for (size_t s = 0; s < impl.plan.steps.size(); ++s) {
    const Kernel* kernel = impl.kernels[s].get();
    if (!kernel) continue;
    const Node& node = impl.graph.node(impl.plan.steps[s].node);
    const StepCost cost = step_cost(impl.plan, node);
    steps.push_back({int(s), node.op_type, node.name, kernel->implementation(), ms[s], cost.bytes, cost.flops});
  }
  return steps;
}

Result<std::vector<TraceEvent>> trace_run(Session& session, const std::vector<Tensor>& inputs) {
  Session::Impl& impl = SessionAccess::impl(session);
  STRIDER_RETURN_IF_ERROR(needs_one_plan(impl, "tracing a run"));
  std::lock_guard lock(impl.running);
  STRIDER_ASSIGN_OR_RETURN(std::vector<Tensor> converted, impl.check_inputs(inputs));
  return impl.executor->trace(converted);
}

Result<std::vector<TappedValue>> run_with_taps(Session& session, const std::vector<Tensor>& inputs) {
  Session::Impl& impl = SessionAccess::impl(session);
  STRIDER_RETURN_IF_ERROR(needs_one_plan(impl, "reading every intermediate value"));
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
  const Session::Impl& impl = SessionAccess::impl(session);
  if (impl.staged) {  // the plan before the split (an empty one when nothing runs there)
    if (const Session* before = impl.staged->before()) return inspect_session(*before);
    return SessionPlanView{&impl.graph, &impl.plan, {}};
  }
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
  impl_->variants.clear();
  impl_->executor.reset();
  impl_->kernels.clear();
  impl_->bound = BoundPlan();
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

Result<std::unique_ptr<Session>> Session::create(const Model& model, const SessionOptions& options) {
  return guard("creating the session", [&] { return create_session(model.impl().graph, options); });
}

const std::vector<ValueInfo>& Session::inputs() const { return impl_->inputs; }
const std::vector<ValueInfo>& Session::outputs() const { return impl_->outputs; }

Result<std::vector<Tensor>> Session::run(const std::vector<Tensor>& inputs) {
  return guard("run", [&]() -> Result<std::vector<Tensor>> {
    std::vector<Tensor> results;
    STRIDER_RETURN_IF_ERROR(impl_->run_into(inputs, results, false));
    return results;
  });
}

Status Session::run(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs) {
  return guard("run", [&] { return impl_->run_into(inputs, outputs, true); });
}

namespace {

// The inputs in `inputs` order, as views of the caller's tensors (no bytes copied).
Result<std::vector<Tensor>> order_inputs(const std::vector<ValueInfo>& inputs, const std::map<std::string, Tensor>& given) {
  std::vector<Tensor> ordered;
  for (const ValueInfo& info : inputs) {
    auto it = given.find(info.name);
    if (it == given.end()) return invalid_argument(fmt::format("missing input '{}'", printable(info.name)));
    const Tensor& t = it->second;
    STRIDER_ASSIGN_OR_RETURN(Tensor view, Tensor::borrow(t.dtype(), t.shape(), const_cast<std::byte*>(t.bytes()), t.byte_size()));
    ordered.push_back(std::move(view));
  }
  for (const auto& entry : given) {
    bool known = std::any_of(inputs.begin(), inputs.end(), [&](const ValueInfo& i) { return i.name == entry.first; });
    if (!known) return invalid_argument(fmt::format("'{}' is not an input of the model", printable(entry.first)));
  }
  return ordered;
}

}  // namespace

Result<std::vector<Tensor>> Session::run(const std::map<std::string, Tensor>& inputs) {
  return guard("run", [&]() -> Result<std::vector<Tensor>> {
    STRIDER_ASSIGN_OR_RETURN(std::vector<Tensor> ordered, order_inputs(impl_->inputs, inputs));
    std::vector<Tensor> results;
    STRIDER_RETURN_IF_ERROR(impl_->run_into(ordered, results, false));
    return results;
  });
}

Status Session::run(const std::map<std::string, Tensor>& inputs, std::vector<Tensor>& outputs) {
  return guard("run", [&]() -> Status {
    STRIDER_ASSIGN_OR_RETURN(std::vector<Tensor> ordered, order_inputs(impl_->inputs, inputs));
    return impl_->run_into(ordered, outputs, true);
  });
}

}  // namespace strider
