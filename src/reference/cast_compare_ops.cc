// Cast and CastLike, comparisons (bool outputs) and logical ops.
#include <fmt/format.h>

#include "base/onnx_types.h"
#include "base/small_types.h"
#include "reference/op_support.h"

namespace strider::ref {
namespace {

// Without `saturate` a float8 target takes out-of-range values to NaN (infinity for e5m2)
// instead of its largest value.
RefTensor cast_to(const RefTensor& x, DType to, bool saturate) {
  RefTensor y = RefTensor::zeros(to, x.shape);
  int64_t count = x.num_elements();
  const bool float8 = is_small_type(to) && is_floating(to);
  for (int64_t i = 0; i < count; ++i) {
    if (float8 && !saturate) y.floats[size_t(i)] = small_type_to_double(small_type_from_double(x.element_as_double(i), to, false), to);
    else convert_element(x, i, y, i);
  }
  return y;
}

Result<bool> saturates(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(int64_t saturate, ctx.attributes().get_int("saturate", 1));
  return saturate != 0;
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
  STRIDER_ASSIGN_OR_RETURN(bool saturate, saturates(ctx));
  return OpOutputs{cast_to(*x, *to, saturate)};
}

Result<OpOutputs> cast_like_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* x, ctx.input(0, "input"));
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* like, ctx.input(1, "target_type"));
  STRIDER_ASSIGN_OR_RETURN(bool saturate, saturates(ctx));
  return OpOutputs{cast_to(*x, like->dtype, saturate)};
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
                                        : compare(op, order_key(a->ints[ia], a->dtype), order_key(b->ints[ib], a->dtype));
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

// BitwiseAnd/Or/Xor and BitShift on integers. The reference holds them as int64 (sign-
// extended; a u64 as its bit pattern), so the bit operations act on the same low bits the
// dtype has and narrowing afterwards gives the dtype's result.
enum class Bitwise { kAnd, kOr, kXor, kShift };

Result<OpOutputs> bitwise(const OpContext& ctx, Bitwise op) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* a, ctx.input(0, "A"));
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* b, ctx.input(1, "B"));
  STRIDER_RETURN_IF_ERROR(require_integer(*a, "input 0 (A)"));
  STRIDER_RETURN_IF_ERROR(require_same_dtype(*a, *b, "input 0 (A)", "input 1 (B)"));
  bool left = true;
  if (op == Bitwise::kShift) {
    STRIDER_ASSIGN_OR_RETURN(std::string direction, ctx.attributes().get_string("direction", "LEFT"));
    if (direction != "LEFT" && direction != "RIGHT")
      return invalid_model("attribute 'direction' must be LEFT or RIGHT, not '" + direction + "'");
    left = direction == "LEFT";
  }
  const int64_t width = 8 * dtype_size(a->dtype);
  STRIDER_ASSIGN_OR_RETURN(
      RefTensor c, broadcast_binary(*a, *b, a->dtype, [&](size_t ia, size_t ib, size_t io, RefTensor& out) {
        const uint64_t x = uint64_t(a->ints[ia]), y = uint64_t(b->ints[ib]);
        uint64_t r = 0;
        switch (op) {
          case Bitwise::kAnd: r = x & y; break;
          case Bitwise::kOr: r = x | y; break;
          case Bitwise::kXor: r = x ^ y; break;
          case Bitwise::kShift: {
            // The value's own bits only (unsigned types: a narrower value has no high bits).
            const uint64_t value = width == 64 ? x : x & ((uint64_t(1) << width) - 1);
            r = y >= uint64_t(width) ? 0 : left ? value << y : value >> y;
            break;
          }
        }
        out.ints[io] = wrap_to_dtype(int64_t(r), out.dtype);
      }));
  return OpOutputs{std::move(c)};
}

Result<OpOutputs> bitwise_and_op(const OpContext& ctx) { return bitwise(ctx, Bitwise::kAnd); }
Result<OpOutputs> bitwise_or_op(const OpContext& ctx) { return bitwise(ctx, Bitwise::kOr); }
Result<OpOutputs> bitwise_xor_op(const OpContext& ctx) { return bitwise(ctx, Bitwise::kXor); }
Result<OpOutputs> bit_shift_op(const OpContext& ctx) { return bitwise(ctx, Bitwise::kShift); }

Result<OpOutputs> bitwise_not_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* x, ctx.input(0, "X"));
  STRIDER_RETURN_IF_ERROR(require_integer(*x, "input 0 (X)"));
  RefTensor y = *x;
  for (int64_t& v : y.ints) v = wrap_to_dtype(int64_t(~uint64_t(v)), y.dtype);
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
    {"BitwiseAnd", 18, 27, bitwise_and_op},
    {"BitwiseOr", 18, 27, bitwise_or_op},
    {"BitwiseXor", 18, 27, bitwise_xor_op},
    {"BitwiseNot", 18, 27, bitwise_not_op},
    {"BitShift", 11, 27, bit_shift_op},
};

}  // namespace

std::span<const OpDefinition> cast_compare_op_definitions() { return kCastCompareOps; }

}  // namespace strider::ref
