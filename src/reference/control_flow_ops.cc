// If, Loop and Scan, interpreted: each body is evaluated as a graph of its own, once per
// branch taken, iteration or step (unlike the runtime, which inlines them:
// passes/inline_control_flow.h; the two share only the importer's Subgraph).
#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "reference/op_support.h"

namespace strider::ref {
namespace {

// As the runtime: a loop that would run longer is refused, not run (a hostile model's
// endless loop must not hang the oracle).
constexpr int64_t kMaxIterations = 4096;

// The node's implicit inputs (what its bodies read from outside), by name.
std::map<std::string, const RefTensor*> outer_values(const OpContext& ctx, size_t* explicit_count) {
  const std::vector<std::string> names = implicit_input_names(ctx.node());
  *explicit_count = ctx.num_inputs() - names.size();
  std::map<std::string, const RefTensor*> outer;
  for (size_t k = 0; k < names.size(); ++k) outer[names[k]] = ctx.optional_input(*explicit_count + k);
  return outer;
}

Result<const Subgraph*> body_of(const OpContext& ctx, const std::string& name) {
  const Attribute* a = ctx.attributes().find(name);
  if (a == nullptr || !a->graph) return invalid_model(fmt::format("no graph attribute '{}'", name));
  return a->graph.get();
}

RefTensor scalar(DType dtype, int64_t v) {
  RefTensor t = RefTensor::zeros(dtype, {});
  t.ints[0] = v;
  return t;
}

// The values stacked along a new dim at `axis` (negative: from the end of the result).
Result<RefTensor> stack(const std::vector<RefTensor>& values, int64_t axis) {
  if (values.empty()) return unsupported("no value to stack: the scan output's shape is unknown");
  const RefTensor& first = values[0];
  const int64_t rank = first.rank() + 1;
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return invalid_model(fmt::format("scan output axis {} of rank {}", axis, rank));
  for (const RefTensor& v : values)
    if (v.shape != first.shape || v.dtype != first.dtype)
      return invalid_model("scan output values differ in shape or dtype between iterations");
  Shape shape = first.shape;
  shape.insert(shape.begin() + axis, int64_t(values.size()));
  RefTensor out = RefTensor::zeros(first.dtype, shape);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= first.shape[size_t(d)];
  for (int64_t d = axis; d < first.rank(); ++d) inner *= first.shape[size_t(d)];
  const int64_t count = int64_t(values.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k = 0; k < count; ++k)
      for (int64_t i = 0; i < inner; ++i) {
        const size_t from = size_t(o * inner + i), to = size_t((o * count + k) * inner + i);
        if (out.is_floating()) out.floats[to] = values[size_t(k)].floats[from];
        else out.ints[to] = values[size_t(k)].ints[from];
      }
  return out;
}

// Element t of x along `axis` (the axis removed).
RefTensor slice_at(const RefTensor& x, int64_t axis, int64_t t) {
  Shape shape = x.shape;
  const int64_t extent = shape[size_t(axis)];
  shape.erase(shape.begin() + axis);
  RefTensor out = RefTensor::zeros(x.dtype, shape);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.shape[size_t(d)];
  for (int64_t d = axis + 1; d < x.rank(); ++d) inner *= x.shape[size_t(d)];
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      const size_t from = size_t((o * extent + t) * inner + i), to = size_t(o * inner + i);
      if (x.is_floating()) out.floats[to] = x.floats[from];
      else out.ints[to] = x.ints[from];
    }
  return out;
}

Result<OpOutputs> if_op(const OpContext& ctx) {
  size_t explicit_count = 0;
  auto outer = outer_values(ctx, &explicit_count);
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* cond, ctx.input(0, "cond"));
  if (cond->num_elements() != 1) return invalid_model(fmt::format("cond has {} elements, not one", cond->num_elements()));
  STRIDER_ASSIGN_OR_RETURN(const Subgraph* branch, body_of(ctx, cond->element_as_double(0) != 0 ? "then_branch" : "else_branch"));
  return evaluate_body(*branch, {}, outer);
}

Result<OpOutputs> loop_op(const OpContext& ctx) {
  size_t explicit_count = 0;
  auto outer = outer_values(ctx, &explicit_count);
  STRIDER_ASSIGN_OR_RETURN(const Subgraph* body, body_of(ctx, "body"));
  for (size_t i : {size_t(0), size_t(1)})
    if (const RefTensor* t = ctx.optional_input(i); t && t->num_elements() != 1)
      return invalid_model(fmt::format("{} has {} elements, not one", i == 0 ? "the trip count" : "cond", t->num_elements()));
  const int64_t trip = ctx.optional_input(0) ? ctx.optional_input(0)->element_as_int(0)
                                             : std::numeric_limits<int64_t>::max();
  bool go = ctx.optional_input(1) ? ctx.optional_input(1)->element_as_double(0) != 0 : true;
  const size_t carried = explicit_count < 2 ? 0 : explicit_count - 2;
  std::vector<RefTensor> state;
  for (size_t k = 0; k < carried; ++k) {
    STRIDER_ASSIGN_OR_RETURN(const RefTensor* v, ctx.input(2 + k, "v_initial"));
    state.push_back(*v);
  }
  std::vector<std::vector<RefTensor>> scans;
  for (int64_t i = 0; i < trip && go; ++i) {
    if (i >= kMaxIterations) return unsupported(fmt::format("the loop runs more than {} iterations", kMaxIterations));
    std::vector<RefTensor> formals{scalar(DType::kI64, i), scalar(DType::kBool, 1)};
    formals.insert(formals.end(), state.begin(), state.end());
    STRIDER_ASSIGN_OR_RETURN(std::vector<RefTensor> outs, evaluate_body(*body, std::move(formals), outer));
    if (outs.size() < 1 + carried) return invalid_model("the body returns fewer values than the loop carries");
    if (outs[0].num_elements() != 1) return invalid_model(fmt::format("the body's cond has {} elements, not one", outs[0].num_elements()));
    go = outs[0].element_as_double(0) != 0;
    std::copy(outs.begin() + 1, outs.begin() + ptrdiff_t(1 + carried), state.begin());
    scans.resize(outs.size() - 1 - carried);
    for (size_t k = 0; k < scans.size(); ++k) scans[k].push_back(std::move(outs[1 + carried + k]));
  }
  OpOutputs outputs = state;
  for (const std::vector<RefTensor>& s : scans) {
    STRIDER_ASSIGN_OR_RETURN(RefTensor stacked, stack(s, 0));
    outputs.push_back(std::move(stacked));
  }
  return outputs;
}

// One scan (opset 9's semantics) of `xs` along `axes` from `states`.
Result<OpOutputs> scan(const OpContext& ctx, const Subgraph& body, std::vector<RefTensor> states,
                       const std::vector<const RefTensor*>& xs, std::vector<int64_t> axes,
                       const std::map<std::string, const RefTensor*>& outer) {
  STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> in_dirs, ctx.attributes().get_ints(ctx.opset() < 9 ? "directions" : "scan_input_directions", {}));
  STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> out_axes, ctx.attributes().get_ints("scan_output_axes", {}));
  STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> out_dirs, ctx.attributes().get_ints("scan_output_directions", {}));
  int64_t steps = -1;
  for (size_t j = 0; j < xs.size(); ++j) {
    if (axes[j] < 0) axes[j] += xs[j]->rank();
    if (axes[j] < 0 || axes[j] >= xs[j]->rank()) return invalid_model(fmt::format("scan input {} has no axis {}", j, axes[j]));
    const int64_t extent = xs[j]->shape[size_t(axes[j])];
    if (steps >= 0 && extent != steps) return invalid_model("the scan inputs differ in length");
    steps = extent;
  }
  if (steps > kMaxIterations) return unsupported(fmt::format("the scan runs more than {} steps", kMaxIterations));
  std::vector<std::vector<RefTensor>> ys;
  for (int64_t t = 0; t < steps; ++t) {
    std::vector<RefTensor> formals = states;
    for (size_t j = 0; j < xs.size(); ++j) {
      const bool reverse = j < in_dirs.size() && in_dirs[j] == 1;
      formals.push_back(slice_at(*xs[j], axes[j], reverse ? steps - 1 - t : t));
    }
    STRIDER_ASSIGN_OR_RETURN(std::vector<RefTensor> outs, evaluate_body(body, std::move(formals), outer));
    if (outs.size() < states.size()) return invalid_model("the body returns fewer values than the scan carries");
    std::copy(outs.begin(), outs.begin() + ptrdiff_t(states.size()), states.begin());
    ys.resize(outs.size() - states.size());
    for (size_t k = 0; k < ys.size(); ++k) ys[k].push_back(std::move(outs[states.size() + k]));
  }
  OpOutputs outputs = states;
  for (size_t k = 0; k < ys.size(); ++k) {
    if (k < out_dirs.size() && out_dirs[k] == 1) std::reverse(ys[k].begin(), ys[k].end());
    STRIDER_ASSIGN_OR_RETURN(RefTensor stacked, stack(ys[k], ctx.opset() >= 9 && k < out_axes.size() ? out_axes[k] : 0));
    outputs.push_back(std::move(stacked));
  }
  return outputs;
}

Result<OpOutputs> scan_op(const OpContext& ctx) {
  size_t explicit_count = 0;
  auto outer = outer_values(ctx, &explicit_count);
  STRIDER_ASSIGN_OR_RETURN(const Subgraph* body, body_of(ctx, "body"));
  STRIDER_ASSIGN_OR_RETURN(int64_t scan_inputs, ctx.attributes().require_int("num_scan_inputs"));
  const size_t first = ctx.opset() < 9 ? 1 : 0;
  const size_t operands = explicit_count - std::min(explicit_count, first);
  if (scan_inputs < 1 || size_t(scan_inputs) > operands)
    return invalid_model(fmt::format("num_scan_inputs {} of {} inputs", scan_inputs, operands));
  std::vector<RefTensor> states;
  std::vector<const RefTensor*> xs;
  for (size_t k = 0; k < operands; ++k) {
    STRIDER_ASSIGN_OR_RETURN(const RefTensor* v, ctx.input(first + k, "operand"));
    if (k < operands - size_t(scan_inputs)) states.push_back(*v);
    else xs.push_back(v);
  }
  if (ctx.opset() >= 9) {
    STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> axes, ctx.attributes().get_ints("scan_input_axes", {}));
    axes.resize(xs.size(), 0);
    return scan(ctx, *body, std::move(states), xs, std::move(axes), outer);
  }
  // Opset 8: dim 0 is a batch; each row is scanned along its dim 0 (the operand's dim 1).
  if (ctx.optional_input(0)) return unsupported("Scan-8 with sequence_lens");
  const int64_t batch = xs[0]->shape.empty() ? 0 : xs[0]->shape[0];
  std::vector<std::vector<RefTensor>> rows;
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<RefTensor> row_states, row_values;
    for (const RefTensor& s : states) row_states.push_back(slice_at(s, 0, b));
    for (const RefTensor* x : xs) row_values.push_back(slice_at(*x, 0, b));
    std::vector<const RefTensor*> row_xs;
    for (const RefTensor& v : row_values) row_xs.push_back(&v);
    STRIDER_ASSIGN_OR_RETURN(OpOutputs row, scan(ctx, *body, std::move(row_states), row_xs,
                                                 std::vector<int64_t>(xs.size(), 0), outer));
    rows.resize(row.size());
    for (size_t k = 0; k < row.size(); ++k) rows[k].push_back(std::move(row[k]));
  }
  OpOutputs outputs;
  for (const std::vector<RefTensor>& r : rows) {
    STRIDER_ASSIGN_OR_RETURN(RefTensor stacked, stack(r, 0));
    outputs.push_back(std::move(stacked));
  }
  return outputs;
}

constexpr OpDefinition kControlFlowOps[] = {
    {"If", 1, 27, if_op},
    {"Loop", 1, 27, loop_op},
    {"Scan", 8, 27, scan_op},
};

}  // namespace

std::span<const OpDefinition> control_flow_op_definitions() { return kControlFlowOps; }

}  // namespace strider::ref
