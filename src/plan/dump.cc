#include "plan/dump.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

namespace strider {

std::string_view storage_kind_name(StorageKind kind) {
  switch (kind) {
    case StorageKind::kArena: return "arena";
    case StorageKind::kConstant: return "constants";
    case StorageKind::kInput: return "inputs";
    case StorageKind::kOutput: return "outputs";
  }
  return "?";
}

std::string_view value_role_name(ValueRole role) {
  switch (role) {
    case ValueRole::kOwn: return "own";
    case ValueRole::kView: return "view";
    case ValueRole::kConcatPart: return "concat-part";
    case ValueRole::kInPlace: return "in-place";
    case ValueRole::kPlacedThrough: return "placed-through";
  }
  return "?";
}

std::string_view step_kind_name(StepKind kind) {
  switch (kind) {
    case StepKind::kKernel: return "kernel";
    case StepKind::kView: return "view";
    case StepKind::kMaterialize: return "materialize";
  }
  return "?";
}

namespace {

std::string dims(std::span<const int64_t> values) {
  std::string s = "[";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i) s += ',';  // (not `"," + to_string(..)`: GCC 12 warns falsely on that, -Wrestrict)
    s += std::to_string(values[i]);
  }
  return s + "]";
}

std::string role_text(const Graph& graph, const Plan& plan, ValueId v) {
  const PlannedValue& p = *plan.values[size_t(v)];
  std::string alias = p.alias_of == kNoValue ? "" : graph.value(p.alias_of).name;
  switch (p.role) {
    case ValueRole::kView: return "view of '" + alias + "'";
    case ValueRole::kConcatPart: return "written in place into concat '" + alias + "'";
    case ValueRole::kInPlace: return "written in place over '" + alias + "'";
    case ValueRole::kPlacedThrough: return "written in place into reshape '" + alias + "'";
    case ValueRole::kOwn: break;
  }
  return graph.value(v).is_constant() ? "constant" : "own";
}

std::string operand_line(const Graph& graph, const Plan& plan, const char* direction, ValueId v) {
  if (v == kNoValue) return fmt::format("    {:<4}(omitted)\n", direction);
  const TensorView& view = plan.view(v);
  return fmt::format("    {:<4}{:<28} {}+{:#x} {}{} strides {} {}\n", direction, "'" + graph.value(v).name + "'",
                     view.allocation->label(), view.byte_offset, dtype_name(view.dtype), dims(view.sizes),
                     dims(view.strides), role_text(graph, plan, v));
}

}  // namespace

std::string plan_to_text(const Graph& graph, const Plan& plan, const std::vector<std::string>& kernel_names) {
  std::string text = fmt::format("plan: layout {}, {} steps\n", plan.layout, plan.steps.size());
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const PlanStep& step = plan.steps[i];
    const Node& node = graph.node(step.node);
    std::string impl = i < kernel_names.size() && !kernel_names[i].empty() ? " " + kernel_names[i] : "";
    std::string origin = node.expanded_from.empty() ? "" : " (expanded from " + node.expanded_from + ")";
    text += fmt::format("step {} {} '{}': {}{}{}\n", i, node.op_type, node.name, step_kind_name(step.kind), impl, origin);
    for (ValueId in : node.inputs) text += operand_line(graph, plan, "in", in);
    for (ValueId out : node.outputs) text += operand_line(graph, plan, "out", out);
  }
  const PlanStats& s = plan.stats;
  for (const auto& a : plan.placeholders) text += fmt::format("allocation {}: {} bytes\n", a->label(), a->size());
  text += fmt::format(
      "summary: {} steps, {} kernels, {} views, {} concat parts in place, {} in place, {} materializations, "
      "{} copies; arena {} bytes, lower bound {} bytes\n",
      s.steps, s.kernels, s.views, s.concat_in_place, s.in_place, s.materializations, s.copies, s.arena_bytes,
      s.lower_bound_bytes);
  return text;
}

std::string plan_to_json(const Graph& graph, const Plan& plan, const std::vector<std::string>& kernel_names) {
  const PlanStats& s = plan.stats;
  nlohmann::json j = {{"layout", plan.layout},     {"arena_bytes", s.arena_bytes},
                      {"lower_bound_bytes", s.lower_bound_bytes}, {"steps", s.steps},
                      {"kernels", s.kernels},     {"views", s.views},
                      {"concat_in_place", s.concat_in_place},   {"in_place", s.in_place},
                      {"materializations", s.materializations}, {"copies", s.copies}};
  for (const auto& a : plan.placeholders) j["allocations"][a->label()] = a->size();
  for (const PlanBuffer& b : plan.buffers)
    j["buffers"].push_back({{"root", graph.value(b.root).name}, {"storage", storage_kind_name(b.kind)},
                            {"offset", b.offset}, {"size", b.size}, {"first_step", b.first_step},
                            {"last_step", b.last_step}});
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const Node& node = graph.node(plan.steps[i].node);
    nlohmann::json step = {{"op", node.op_type}, {"node", node.name}, {"kind", step_kind_name(plan.steps[i].kind)}};
    if (i < kernel_names.size()) step["kernel"] = kernel_names[i];
    for (ValueId out : node.outputs) {
      if (out == kNoValue) continue;
      const PlannedValue& p = *plan.values[size_t(out)];
      step["outputs"].push_back({{"value", graph.value(out).name}, {"allocation", p.view.allocation->label()},
                                 {"offset", p.view.byte_offset}, {"sizes", p.view.sizes},
                                 {"strides", p.view.strides}, {"role", value_role_name(p.role)}});
    }
    j["step_list"].push_back(std::move(step));
  }
  return j.dump(2) + "\n";
}

std::string plan_to_svg(const Graph& graph, const Plan& plan) {
  const double kStepWidth = 60, kHeight = 600, kLeft = 80, kTop = 30;
  double steps = std::max<size_t>(plan.steps.size(), 1);
  double arena = std::max<int64_t>(plan.stats.arena_bytes, 1);
  std::string svg = fmt::format(
      "<svg xmlns='http://www.w3.org/2000/svg' width='{}' height='{}' font-family='monospace' font-size='9'>\n"
      "<text x='4' y='16'>arena {} bytes (lower bound {}), layout {}: x = step, y = offset</text>\n",
      kLeft + steps * kStepWidth + 20, kTop + kHeight + 40, plan.stats.arena_bytes, plan.stats.lower_bound_bytes,
      plan.layout);
  for (size_t i = 0; i < plan.steps.size(); ++i)
    svg += fmt::format("<text x='{}' y='{}'>{}</text>\n", kLeft + double(i) * kStepWidth, kTop + kHeight + 14, i);
  auto consumers = graph.consumers();
  for (ValueId v = 0; v < ValueId(plan.values.size()); ++v) {
    const auto& p = plan.values[size_t(v)];
    if (!p || plan.buffers[size_t(p->buffer)].kind != StorageKind::kArena) continue;
    // The value's own step range: from its producer to its last reader.
    double first = graph.value(v).producer == kNoNode ? 0 : graph.value(v).producer;
    double last = consumers[size_t(v)].empty() ? first : consumers[size_t(v)].back();
    ByteRange r = footprint(p->view);
    double y = kTop + double(r.begin) / arena * kHeight;
    double h = std::max(1.0, double(r.end - r.begin) / arena * kHeight);
    double x = kLeft + first * kStepWidth, w = (last - first + 1) * kStepWidth;
    const char* style = p->role == ValueRole::kView         ? "fill='none' stroke='#555' stroke-dasharray='4 2'"
                        : p->role == ValueRole::kConcatPart ? "fill='#7fc97f' fill-opacity='0.7' stroke='#2b6'"
                        : p->role == ValueRole::kInPlace    ? "fill='#fdc086' fill-opacity='0.7' stroke='#c60'"
                                                            : "fill='#9ecae1' fill-opacity='0.6' stroke='#268'";
    svg += fmt::format(
        "<rect x='{:.1f}' y='{:.1f}' width='{:.1f}' height='{:.1f}' {}><title>{} ({}) [{:#x}, {:#x})</title></rect>\n",
        x, y, w, h, style, graph.value(v).name, value_role_name(p->role), r.begin, r.end);
    if (p->role == ValueRole::kOwn)
      svg += fmt::format("<text x='{:.1f}' y='{:.1f}'>{}</text>\n", x + 2, y + 9, graph.value(v).name);
  }
  return svg + "</svg>\n";
}

}  // namespace strider
