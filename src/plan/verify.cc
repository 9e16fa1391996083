#include "plan/verify.h"

#include <fmt/format.h>

#include <algorithm>

namespace strider {
namespace {

std::string describe(const Graph& graph, const Plan& plan, ValueId v) {
  ByteRange r = footprint(plan.view(v));
  return fmt::format("'{}' {} bytes [{:#x}, {:#x})", graph.value(v).name, plan.view(v).allocation->label(), r.begin,
                     r.end);
}

bool aliases(const Plan& plan, ValueId a, ValueId b) {
  for (ValueId v = a; v != kNoValue; v = plan.values[size_t(v)]->alias_of)
    if (v == b) return true;
  for (ValueId v = b; v != kNoValue; v = plan.values[size_t(v)]->alias_of)
    if (v == a) return true;
  return false;
}

Status check_views_and_alignment(const Graph& graph, const Plan& plan) {
  for (ValueId v = 0; v < ValueId(plan.values.size()); ++v) {
    if (!plan.values[size_t(v)]) continue;
    const TensorView& view = plan.view(v);
    auto again = make_view(*view.allocation, view.byte_offset, view.dtype, view.sizes, view.strides,
                           fmt::format("value '{}'", graph.value(v).name));
    if (!again.is_ok()) return internal_error("plan: " + again.status().message());
  }
  for (const PlanBuffer& b : plan.buffers)
    if (b.offset % 64 != 0)
      return internal_error(fmt::format("plan: buffer of '{}' at offset {} is not 64-byte aligned",
                                        graph.value(b.root).name, b.offset));
  return Status::ok();
}

struct Lifetime {
  int first = 0, last = -1;
};

// Each buffer's steps recomputed from the plan's own steps, apart from the packer's
// figures: from the first step that writes a value in it (inputs and constants exist
// before step 0) to the last step that reads one (graph outputs: past the last step).
// The packer's numbers are what is being checked, so they are not trusted here.
std::vector<Lifetime> buffer_lifetimes(const Graph& graph, const Plan& plan) {
  int steps = int(plan.steps.size());
  std::vector<Lifetime> life(plan.buffers.size());
  for (size_t b = 0; b < plan.buffers.size(); ++b) {
    StorageKind kind = plan.buffers[b].kind;
    life[b] = kind == StorageKind::kArena || kind == StorageKind::kOutput ? Lifetime{steps, -1} : Lifetime{-1, -1};
  }
  auto buffer_of = [&](ValueId v) { return plan.values[size_t(v)] ? plan.values[size_t(v)]->buffer : -1; };
  for (int i = 0; i < steps; ++i) {
    const Node& node = graph.node(plan.steps[size_t(i)].node);
    for (ValueId out : node.outputs)
      if (int b = out == kNoValue ? -1 : buffer_of(out); b >= 0) {
        if (plan.buffers[size_t(b)].kind == StorageKind::kArena || plan.buffers[size_t(b)].kind == StorageKind::kOutput)
          life[size_t(b)].first = std::min(life[size_t(b)].first, i);
        life[size_t(b)].last = std::max(life[size_t(b)].last, i);
      }
    for (ValueId in : node.inputs)
      if (int b = in == kNoValue ? -1 : buffer_of(in); b >= 0) life[size_t(b)].last = std::max(life[size_t(b)].last, i);
  }
  for (ValueId out : graph.outputs())
    if (int b = buffer_of(out); b >= 0) life[size_t(b)].last = steps;
  return life;
}

// The lifetimes the packer used must cover the real ones, and two arena buffers live at
// the same time (by the real lifetimes) must not share a byte.
Status check_buffers_disjoint(const Graph& graph, const Plan& plan) {
  std::vector<Lifetime> life = buffer_lifetimes(graph, plan);
  for (size_t i = 0; i < plan.buffers.size(); ++i) {
    const PlanBuffer& b = plan.buffers[i];
    // Only the arena is packed by lifetimes; constants, inputs and outputs live throughout.
    if (b.kind != StorageKind::kArena || life[i].last < life[i].first) continue;
    if (b.first_step > life[i].first || b.last_step < life[i].last)
      return internal_error(fmt::format("plan: buffer of {} was packed as live in steps {}-{} but is used in steps {}-{}",
                                        describe(graph, plan, b.root), b.first_step, b.last_step, life[i].first,
                                        life[i].last));
  }
  for (size_t i = 0; i < plan.buffers.size(); ++i)
    for (size_t j = i + 1; j < plan.buffers.size(); ++j) {
      const PlanBuffer& a = plan.buffers[i];
      const PlanBuffer& b = plan.buffers[j];
      if (a.kind != b.kind || life[i].first > life[j].last || life[j].first > life[i].last) continue;
      if (a.offset < b.offset + b.size && b.offset < a.offset + a.size && a.size > 0 && b.size > 0)
        return internal_error(fmt::format("plan: buffers of {} and {} overlap while both live (steps {}-{} and {}-{})",
                                          describe(graph, plan, a.root), describe(graph, plan, b.root), life[i].first,
                                          life[i].last, life[j].first, life[j].last));
    }
  return Status::ok();
}

// Each value's steps from its producer to the last read of it or of any value aliasing it.
std::vector<std::pair<int, int>> value_lifetimes(const Graph& graph, const Plan& plan) {
  std::vector<std::pair<int, int>> life(plan.values.size(), {0, -1});
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const Node& node = graph.node(plan.steps[i].node);
    for (ValueId out : node.outputs)
      if (out != kNoValue) life[size_t(out)] = {int(i), int(i)};
  }
  for (size_t i = 0; i < plan.steps.size(); ++i)
    for (ValueId in : graph.node(plan.steps[i].node).inputs)
      for (ValueId v = in; v != kNoValue; v = plan.values[size_t(v)]->alias_of)
        life[size_t(v)].second = std::max(life[size_t(v)].second, int(i));
  for (ValueId out : graph.outputs())
    for (ValueId v = out; v != kNoValue; v = plan.values[size_t(v)]->alias_of)
      life[size_t(v)].second = int(plan.steps.size());
  return life;
}

// Inside one buffer, values written by different steps (not views) that are live at the
// same time must not share a byte unless one aliases the other.
Status check_writers_disjoint(const Graph& graph, const Plan& plan) {
  std::vector<std::vector<ValueId>> written(plan.buffers.size());
  for (ValueId v = 0; v < ValueId(plan.values.size()); ++v) {
    const auto& p = plan.values[size_t(v)];
    if (p && p->role != ValueRole::kView && graph.value(v).producer != kNoNode) written[size_t(p->buffer)].push_back(v);
  }
  std::vector<std::pair<int, int>> life = value_lifetimes(graph, plan);
  auto live_together = [&](ValueId a, ValueId b) {
    return life[size_t(a)].first <= life[size_t(b)].second && life[size_t(b)].first <= life[size_t(a)].second;
  };
  for (const auto& values : written)
    for (size_t i = 0; i < values.size(); ++i)
      for (size_t j = i + 1; j < values.size(); ++j) {
        ValueId a = values[i], b = values[j];
        if (aliases(plan, a, b) || !live_together(a, b) || !may_overlap(plan.view(a), plan.view(b))) continue;
        return internal_error(fmt::format("plan: {} and {} are written by different steps, live together and overlap",
                                          describe(graph, plan, a), describe(graph, plan, b)));
      }
  return Status::ok();
}

}  // namespace

Status verify_plan(const Graph& graph, const Plan& plan) {
  STRIDER_RETURN_IF_ERROR(check_views_and_alignment(graph, plan));
  STRIDER_RETURN_IF_ERROR(check_buffers_disjoint(graph, plan));
  return check_writers_disjoint(graph, plan);
}

}  // namespace strider
