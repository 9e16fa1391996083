// Placement: packs the buffers into the plan's four placeholder allocations (arena,
// constants, inputs, outputs), rebases every virtual view onto its placeholder (re-checking
// its bounds there), and lists the steps with their operand views and what each does.
// Nothing here touches a device: binding (bind.cc) gives the placeholders real memory.
#include <fmt/format.h>

#include "ops/op_registry.h"
#include "ops/view_ops.h"
#include "plan/planner_state.h"

namespace strider::plan_internal {
namespace {

constexpr StorageKind kKinds[] = {StorageKind::kArena, StorageKind::kConstant, StorageKind::kInput,
                                  StorageKind::kOutput};

// Offsets for non-arena buffers: one after another, aligned. Returns each kind's size.
std::array<int64_t, 4> lay_out_buffers(PlannerState& s) {
  std::array<int64_t, 4> sizes{};
  sizes[0] = pack_arena(s.buffers, s.options.reuse_memory);
  for (PlanBuffer& b : s.buffers) {
    if (b.kind == StorageKind::kArena) continue;
    int64_t& end = sizes[size_t(b.kind)];
    b.offset = end;
    end += align_up(b.size);
  }
  return sizes;
}

// A Concat all of whose parts already sit in their slices runs nothing; count the rest.
int concat_copies(const Graph& graph, const Node& node, const Plan& plan) {
  const TensorView& out = plan.view(node.outputs[0]);
  int64_t axis = node.attributes.get_int("axis", 0).value();
  if (axis < 0) axis += out.rank();
  int copies = 0;
  int64_t offset = 0;
  for (ValueId part : node.inputs) {
    int64_t size = graph.value(part).shape[size_t(axis)];
    auto slice = slice_view(out, axis, offset, offset + size, 1);
    if (!slice.is_ok() || !same_view(*slice, plan.view(part))) ++copies;
    offset += size;
  }
  return copies;
}

// A view op's output with bytes of its own that its input already is, element for element
// (a Reshape whose product was placed through it, kPlacedThrough): nothing to copy.
bool already_in_place(const PlannerState& s, const Node& node, size_t i, const Plan& plan) {
  if (node.inputs.empty() || node.inputs[0] == kNoValue) return false;
  auto source = output_view(NodeInputs(s.graph, node), i, plan.view(node.inputs[0]));
  return source.is_ok() && *source && same_view(**source, plan.view(node.outputs[i]));
}

StepKind classify_step(const PlannerState& s, const Node& node, const Plan& plan, int* copies) {
  *copies = 0;
  if (node.domain == "strider" && node.op_type == "Materialize") return StepKind::kMaterialize;
  if (node.op_type == "Concat") {
    *copies = concat_copies(s.graph, node, plan);
    return *copies == 0 ? StepKind::kView : StepKind::kKernel;
  }
  const OpSchema* schema = find_op_schema(node.domain, node.op_type);
  if (schema == nullptr || schema->traits.view == ViewKind::kNone) return StepKind::kKernel;
  bool materialized = false;
  for (size_t i = 0; i < node.outputs.size(); ++i) {
    const ValueId out = node.outputs[i];
    if (out == kNoValue || s.decisions[size_t(out)].role == ValueRole::kView) continue;
    if (s.decisions[size_t(out)].materialized) materialized = true;
    else if (!already_in_place(s, node, i, plan)) ++*copies;
  }
  if (materialized) return StepKind::kMaterialize;
  return *copies == 0 ? StepKind::kView : StepKind::kKernel;
}

Status place_values(PlannerState& s, Plan& plan) {
  plan.values.assign(size_t(s.graph.num_values()), std::nullopt);
  for (ValueId v = 0; v < s.graph.num_values(); ++v) {
    if (!s.virtual_views[size_t(v)]) continue;
    const TensorView& virtual_view = *s.virtual_views[size_t(v)];
    const PlanBuffer& buffer = s.buffers[size_t(s.buffer_of[size_t(v)])];
    const Value& value = s.graph.value(v);
    STRIDER_ASSIGN_OR_RETURN(TensorView view,
                             make_view(*plan.placeholders[size_t(buffer.kind)], buffer.offset + virtual_view.byte_offset,
                                       value.dtype, virtual_view.sizes, virtual_view.strides,
                                       fmt::format("value '{}'", value.name)));
    const Decision& d = s.decisions[size_t(v)];
    plan.values[size_t(v)] = PlannedValue{std::move(view), d.role, d.alias_of, s.buffer_of[size_t(v)]};
  }
  return Status::ok();
}

void list_steps(const PlannerState& s, Plan& plan) {
  PlanStats& stats = plan.stats;
  for (NodeId id = 0; id < s.graph.num_nodes(); ++id) {
    const Node& node = s.graph.node(id);
    PlanStep step;
    step.node = id;
    for (ValueId in : node.inputs) step.inputs.push_back(in == kNoValue ? TensorView{} : plan.view(in));
    for (ValueId out : node.outputs) step.outputs.push_back(out == kNoValue ? TensorView{} : plan.view(out));
    int copies = 0;
    step.kind = classify_step(s, node, plan, &copies);
    stats.copies += step.kind == StepKind::kMaterialize ? 0 : copies;
    stats.materializations += step.kind == StepKind::kMaterialize ? 1 : 0;
    stats.kernels += step.kind == StepKind::kView ? 0 : 1;
    plan.steps.push_back(std::move(step));
  }
  stats.steps = int(plan.steps.size());
  for (const auto& value : plan.values) {
    if (!value) continue;
    stats.views += value->role == ValueRole::kView;
    stats.concat_in_place += value->role == ValueRole::kConcatPart;
    stats.in_place += value->role == ValueRole::kInPlace;
  }
}

}  // namespace

Status place(PlannerState& s, Plan& plan) {
  std::array<int64_t, 4> sizes = lay_out_buffers(s);
  for (StorageKind kind : kKinds)
    plan.placeholders.push_back(std::make_unique<Allocation>(
        uint64_t(kind), std::string(storage_kind_name(kind)), kPlannedDevice, nullptr,
        std::max<int64_t>(sizes[size_t(kind)], kBufferAlignment), kBufferAlignment, StorageMode::kDevice, false));
  STRIDER_RETURN_IF_ERROR(place_values(s, plan));
  plan.buffers = s.buffers;
  plan.stats.arena_bytes = sizes[0];
  plan.stats.lower_bound_bytes = live_bytes_lower_bound(s.buffers, s.graph.num_nodes());
  list_steps(s, plan);
  return Status::ok();
}

}  // namespace strider::plan_internal
