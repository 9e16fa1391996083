#include <fmt/format.h>

#include "plan/plan.h"

namespace strider {
namespace {

constexpr int64_t kAlignment = 64;

Status place_value(const Graph& graph, ValueId id, Device& device, Plan& plan) {
  if (plan.views[size_t(id)]) return Status::ok();
  const Value& v = graph.value(id);
  int64_t bytes = num_elements(v.shape) * dtype_size(v.dtype);
  std::string label = (v.is_constant() ? "const:" : "value:") + v.name;
  STRIDER_ASSIGN_OR_RETURN(Allocation* allocation, device.allocate(bytes, kAlignment, label));
  plan.allocations.emplace_back(&device, allocation);
  STRIDER_ASSIGN_OR_RETURN(TensorView view, make_dense_view(*allocation, 0, v.dtype, v.shape,
                                                            fmt::format("value '{}'", v.name)));
  if (v.is_constant()) STRIDER_RETURN_IF_ERROR(device.upload(*v.constant, view));
  plan.views[size_t(id)] = std::move(view);
  return Status::ok();
}

}  // namespace

Result<Plan> make_dense_plan(const Graph& graph, Device& device) {
  Plan plan;
  plan.views.resize(size_t(graph.num_values()));
  for (ValueId id : graph.inputs()) STRIDER_RETURN_IF_ERROR(place_value(graph, id, device, plan));
  for (NodeId n = 0; n < graph.num_nodes(); ++n) {
    const Node& node = graph.node(n);
    PlanStep step;
    step.node = n;
    for (ValueId in : node.inputs) {
      if (in != kNoValue) STRIDER_RETURN_IF_ERROR(place_value(graph, in, device, plan));
      step.inputs.push_back(in == kNoValue ? TensorView{} : *plan.views[size_t(in)]);
    }
    for (ValueId out : node.outputs) {
      if (out != kNoValue) STRIDER_RETURN_IF_ERROR(place_value(graph, out, device, plan));
      step.outputs.push_back(out == kNoValue ? TensorView{} : *plan.views[size_t(out)]);
    }
    plan.steps.push_back(std::move(step));
  }
  for (ValueId id : graph.outputs()) STRIDER_RETURN_IF_ERROR(place_value(graph, id, device, plan));
  return plan;
}

}  // namespace strider
