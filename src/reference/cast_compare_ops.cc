// Cast and CastLike, comparisons (bool outputs) and logical ops.
#include <fmt/format.h>

#include "base/onnx_types.h"
#include "reference/op_support.h"

namespace strider::ref {
namespace {

RefTensor cast_to(const RefTensor& x, DType to) {
  RefTensor y = RefTensor::zeros(to, x.shape);
  int64_t count = x.num_elements();
  for (int64_t i = 0; i < count; ++i) convert_element(x, i, y, i);
  return y;
}

// Cast: floats round to the target's precision (nearest even), floating to integer
// truncates toward zero (then wraps), integers wrap, and to bool is x != 0. The saturate
// attribute of opset 19 concerns float8 types only.
Result<OpOutputs> cast_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* x, ctx.input(0, "input"));
  STRIDER_ASSIGN_OR_RETURN(int64_t to_code, ctx.attributes().require_int("to"));
  std::optional<DType> to = dtype_from_onnx_code(int(to_code));
  if (!to)
    return unsupported(fmt::format("attribute 'to' is {} ({}), which strider does not have",
                                   onnx_type_name(int(to_code)), to_code));
  return OpOutputs{cast_to(*x, *to)};
}

Result<OpOutputs> cast_like_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* x, ctx.input(0, "input"));
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* like, ctx.input(1, "target_type"));
  return OpOutputs{cast_to(*x, like->dtype)};
}

enum class Comparison { kEqual, kLess, kGreater, kLessOrEqual, kGreaterOrEqual };

template <typename T>
bool compare(Comparison op, T a, T b) {
  switch (op) {
    case Comparison::kEqual: return a == b;
    case Comparison::kLess: return a < b;
    case Comparison::kGreater: return a > b;
    case Comparison::kLessOrEqual: return a <= b;
    case Comparison::kGreaterOrEqual: return a >= b;
  }
  return false;
}

Result<OpOutputs> comparison(const OpContext& ctx, Comparison op) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* a, ctx.input(0, "A"));
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* b, ctx.input(1, "B"));
  STRIDER_RETURN_IF_ERROR(require_same_dtype(*a, *b, "input 0 (A)", "input 1 (B)"));
  STRIDER_ASSIGN_OR_RETURN(
      RefTensor c,
      broadcast_binary(*a, *b, DType::kBool, [&](size_t ia, size_t ib, size_t io, RefTensor& out) {
        out.ints[io] = a->is_floating() ? compare(op, a->floats[ia], b->floats[ib])
                                        : compare(op, a->ints[ia], b->ints[ib]);
      }));
  return OpOutputs{std::move(c)};
}

Result<OpOutputs> equal_op(const OpContext& ctx) { return comparison(ctx, Comparison::kEqual); }
Result<OpOutputs> less_op(const OpContext& ctx) { return comparison(ctx, Comparison::kLess); }
Result<OpOutputs> greater_op(const OpContext& ctx) { return comparison(ctx, Comparison::kGreater); }
Result<OpOutputs> less_or_equal_op(const OpContext& ctx) {
  return comparison(ctx, Comparison::kLessOrEqual);
}
Result<OpOutputs> greater_or_equal_op(const OpContext& ctx) {
  return comparison(ctx, Comparison::kGreaterOrEqual);
}

Status require_bool(const RefTensor& t, std::string_view what) {
  if (t.dtype == DType::kBool) return Status::ok();
  return invalid_model(fmt::format("{} is {}, expected bool", what, dtype_name(t.dtype)));
}

enum class Logical { kAnd, kOr, kXor };

Result<OpOutputs> logical(const OpContext& ctx, Logical op) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* a, ctx.input(0, "A"));
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* b, ctx.input(1, "B"));
  STRIDER_RETURN_IF_ERROR(require_bool(*a, "input 0 (A)"));
  STRIDER_RETURN_IF_ERROR(require_bool(*b, "input 1 (B)"));
  STRIDER_ASSIGN_OR_RETURN(
      RefTensor c,
      broadcast_binary(*a, *b, DType::kBool, [&](size_t ia, size_t ib, size_t io, RefTensor& out) {
        bool x = a->ints[ia] != 0, y = b->ints[ib] != 0;
        out.ints[io] = op == Logical::kAnd ? (x && y) : op == Logical::kOr ? (x || y) : (x != y);
      }));
  return OpOutputs{std::move(c)};
}

Result<OpOutputs> and_op(const OpContext& ctx) { return logical(ctx, Logical::kAnd); }
Result<OpOutputs> or_op(const OpContext& ctx) { return logical(ctx, Logical::kOr); }
Result<OpOutputs> xor_op(const OpContext& ctx) { return logical(ctx, Logical::kXor); }

Result<OpOutputs> not_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* x, ctx.input(0, "X"));
  STRIDER_RETURN_IF_ERROR(require_bool(*x, "input 0 (X)"));
  RefTensor y = *x;
  for (int64_t& v : y.ints) v = v == 0;
  return OpOutputs{std::move(y)};
}

constexpr OpDefinition kCastCompareOps[] = {
    {"Cast", 7, 27, cast_op},
    {"CastLike", 15, 27, cast_like_op},
    {"Equal", 7, 27, equal_op},
    {"Less", 7, 27, less_op},
    {"Greater", 7, 27, greater_op},
    {"LessOrEqual", 12, 27, less_or_equal_op},
    {"GreaterOrEqual", 12, 27, greater_or_equal_op},
    {"And", 7, 27, and_op},
    {"Or", 7, 27, or_op},
    {"Xor", 7, 27, xor_op},
    {"Not", 7, 27, not_op},
};

}  // namespace

std::span<const OpDefinition> cast_compare_op_definitions() { return kCastCompareOps; }

}  // namespace strider::ref
