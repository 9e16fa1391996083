// Reductions: ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd, ReduceL1, ReduceL2,
// ReduceSumSquare, ReduceLogSum and ReduceLogSumExp, with axes as an attribute or (from
// opset 13 for ReduceSum, 18 for the others) as an optional input, keepdims and
// noop_with_empty_axes.
#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "base/shape.h"
#include "reference/op_support.h"

namespace strider::ref {
namespace {

enum class Reduction { kSum, kMean, kMax, kMin, kProd, kL1, kL2, kSumSquare, kLogSum, kLogSumExp };

// Which input elements feed which output element.
struct ReducePlan {
  Shape out_shape;
  std::vector<int64_t> output_of;  // per input element, the flat output index
  int64_t out_count = 0;
  int64_t group_size = 1;  // input elements per output element
};

// The reduced axes: empty axes reduce everything unless noop_with_empty_axes, in which case
// nothing is reduced (each output is the reduction of one element).
Result<std::vector<bool>> reduced_axes(const OpContext& ctx, int64_t rank, int axes_input_since) {
  std::vector<int64_t> axes;
  bool noop_when_empty = false;
  if (ctx.opset() >= axes_input_since) {
    if (const RefTensor* t = ctx.optional_input(1)) {
      STRIDER_ASSIGN_OR_RETURN(axes, read_ints(*t, "input 1 (axes)"));
    }
    STRIDER_ASSIGN_OR_RETURN(int64_t noop, ctx.attributes().get_int("noop_with_empty_axes", 0));
    noop_when_empty = noop != 0;
  } else {
    STRIDER_ASSIGN_OR_RETURN(axes, ctx.attributes().get_ints("axes", {}));
  }
  std::vector<bool> reduced(size_t(rank), axes.empty() && !noop_when_empty);
  STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> normalized, normalized_axes(axes, rank, "axes"));
  for (int64_t a : normalized) reduced[size_t(a)] = true;
  return reduced;
}

Result<ReducePlan> reduce_plan(const OpContext& ctx, const Shape& in, int axes_input_since) {
  STRIDER_ASSIGN_OR_RETURN(std::vector<bool> reduced,
                           reduced_axes(ctx, int64_t(in.size()), axes_input_since));
  STRIDER_ASSIGN_OR_RETURN(int64_t keepdims, ctx.attributes().get_int("keepdims", 1));
  ReducePlan plan;
  Shape kept = in;
  for (size_t d = 0; d < in.size(); ++d) {
    if (reduced[d]) {
      kept[d] = 1;
      plan.group_size *= in[d];
    }
    if (!reduced[d] || keepdims != 0) plan.out_shape.push_back(kept[d]);
  }
  Strides kept_strides = contiguous_strides(kept);
  plan.out_count = num_elements(kept);
  plan.output_of.resize(size_t(num_elements(in)));
  for_each_index(in, [&](int64_t flat, const std::vector<int64_t>& index) {
    int64_t o = 0;
    for (size_t d = 0; d < index.size(); ++d)
      if (!reduced[d]) o += index[d] * kept_strides[d];
    plan.output_of[size_t(flat)] = o;
  });
  return plan;
}

double float_initial(Reduction r) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  switch (r) {
    case Reduction::kMax: return -kInf;
    case Reduction::kMin: return kInf;
    case Reduction::kProd: return 1;
    default: return 0;
  }
}

// Accumulates v into acc; NaN propagates through Max and Min.
double float_step(Reduction r, double acc, double v, double group_max) {
  switch (r) {
    case Reduction::kMax: return (std::isnan(v) || v > acc) ? v : acc;
    case Reduction::kMin: return (std::isnan(v) || v < acc) ? v : acc;
    case Reduction::kProd: return acc * v;
    case Reduction::kL1: return acc + std::fabs(v);
    case Reduction::kL2:
    case Reduction::kSumSquare: return acc + v * v;
    case Reduction::kLogSumExp: return acc + std::exp(v - group_max);
    default: return acc + v;
  }
}

double float_finish(Reduction r, double acc, int64_t count, double group_max) {
  switch (r) {
    case Reduction::kMean: return acc / double(count);
    case Reduction::kL2: return std::sqrt(acc);
    case Reduction::kLogSum: return std::log(acc);
    case Reduction::kLogSumExp:
      return std::isinf(group_max) ? group_max : group_max + std::log(acc);
    default: return acc;
  }
}

RefTensor reduce_floats(const RefTensor& x, const ReducePlan& plan, Reduction r) {
  std::vector<double> group_max(size_t(plan.out_count), -std::numeric_limits<double>::infinity());
  if (r == Reduction::kLogSumExp)
    for (size_t i = 0; i < x.floats.size(); ++i)
      group_max[size_t(plan.output_of[i])] =
          std::max(group_max[size_t(plan.output_of[i])], x.floats[i]);
  std::vector<double> acc(size_t(plan.out_count), float_initial(r));
  for (size_t i = 0; i < x.floats.size(); ++i) {
    size_t o = size_t(plan.output_of[i]);
    acc[o] = float_step(r, acc[o], x.floats[i], group_max[o]);
  }
  RefTensor y = RefTensor::zeros(x.dtype, plan.out_shape);
  for (size_t o = 0; o < acc.size(); ++o)
    y.floats[o] = float_finish(r, acc[o], plan.group_size, group_max[o]);
  return y;
}

// Integers reduce exactly (wrapping); Mean truncates toward zero. L2, LogSum and LogSumExp
// are computed in double and truncated.
RefTensor reduce_ints(const RefTensor& x, const ReducePlan& plan, Reduction r) {
  bool via_double = r == Reduction::kL2 || r == Reduction::kLogSum || r == Reduction::kLogSumExp;
  if (via_double) {
    RefTensor as_float = RefTensor::zeros(DType::kF64, x.shape);
    for (size_t i = 0; i < x.ints.size(); ++i) as_float.floats[i] = x.element_as_double(int64_t(i));
    RefTensor reduced = reduce_floats(as_float, plan, r);
    RefTensor y = RefTensor::zeros(x.dtype, plan.out_shape);
    for (size_t o = 0; o < y.ints.size(); ++o) convert_element(reduced, int64_t(o), y, int64_t(o));
    return y;
  }
  int64_t initial = r == Reduction::kMax    ? integer_lowest(x.dtype)
                    : r == Reduction::kMin  ? (x.dtype == DType::kU64 ? -1 : integer_highest(x.dtype))
                    : r == Reduction::kProd ? 1
                                            : 0;
  std::vector<int64_t> acc(size_t(plan.out_count), initial);
  for (size_t i = 0; i < x.ints.size(); ++i) {
    int64_t v = x.ints[i];
    int64_t& a = acc[size_t(plan.output_of[i])];
    switch (r) {
      case Reduction::kMax: a = max_of(a, v, x.dtype); break;
      case Reduction::kMin: a = min_of(a, v, x.dtype); break;
      case Reduction::kProd: a = wrapping_mul(a, v); break;
      case Reduction::kL1: a = wrapping_add(a, v < 0 && x.dtype != DType::kU64 ? wrapping_sub(0, v) : v); break;
      case Reduction::kSumSquare: a = wrapping_add(a, wrapping_mul(v, v)); break;
      default: a = wrapping_add(a, v); break;
    }
  }
  RefTensor y = RefTensor::zeros(x.dtype, plan.out_shape);
  for (size_t o = 0; o < acc.size(); ++o) {
    int64_t v = acc[o];
    if (r == Reduction::kMean) v = plan.group_size == 0 ? 0 : v / plan.group_size;
    y.ints[o] = wrap_to_dtype(v, y.dtype);
  }
  return y;
}

Result<OpOutputs> reduce(const OpContext& ctx, Reduction r, int axes_input_since) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* x, ctx.input(0, "data"));
  if (x->dtype == DType::kBool && r != Reduction::kMax && r != Reduction::kMin)
    return invalid_model("input 0 (data) is bool, expected a numeric type");
  STRIDER_ASSIGN_OR_RETURN(ReducePlan plan, reduce_plan(ctx, x->shape, axes_input_since));
  return OpOutputs{x->is_floating() ? reduce_floats(*x, plan, r) : reduce_ints(*x, plan, r)};
}

Result<OpOutputs> reduce_sum_op(const OpContext& ctx) { return reduce(ctx, Reduction::kSum, 13); }
Result<OpOutputs> reduce_mean_op(const OpContext& ctx) { return reduce(ctx, Reduction::kMean, 18); }
Result<OpOutputs> reduce_max_op(const OpContext& ctx) { return reduce(ctx, Reduction::kMax, 18); }
Result<OpOutputs> reduce_min_op(const OpContext& ctx) { return reduce(ctx, Reduction::kMin, 18); }
Result<OpOutputs> reduce_prod_op(const OpContext& ctx) { return reduce(ctx, Reduction::kProd, 18); }
Result<OpOutputs> reduce_l1_op(const OpContext& ctx) { return reduce(ctx, Reduction::kL1, 18); }
Result<OpOutputs> reduce_l2_op(const OpContext& ctx) { return reduce(ctx, Reduction::kL2, 18); }
Result<OpOutputs> reduce_sum_square_op(const OpContext& ctx) {
  return reduce(ctx, Reduction::kSumSquare, 18);
}
Result<OpOutputs> reduce_log_sum_op(const OpContext& ctx) {
  return reduce(ctx, Reduction::kLogSum, 18);
}
Result<OpOutputs> reduce_log_sum_exp_op(const OpContext& ctx) {
  return reduce(ctx, Reduction::kLogSumExp, 18);
}

constexpr OpDefinition kReduceOps[] = {
    {"ReduceSum", 7, 27, reduce_sum_op},        {"ReduceMean", 7, 27, reduce_mean_op},
    {"ReduceMax", 7, 27, reduce_max_op},        {"ReduceMin", 7, 27, reduce_min_op},
    {"ReduceProd", 7, 27, reduce_prod_op},      {"ReduceL1", 7, 27, reduce_l1_op},
    {"ReduceL2", 7, 27, reduce_l2_op},          {"ReduceSumSquare", 7, 27, reduce_sum_square_op},
    {"ReduceLogSum", 7, 27, reduce_log_sum_op}, {"ReduceLogSumExp", 7, 27, reduce_log_sum_exp_op},
};

}  // namespace

std::span<const OpDefinition> reduce_op_definitions() { return kReduceOps; }

}  // namespace strider::ref
