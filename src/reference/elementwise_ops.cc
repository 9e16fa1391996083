// Elementwise ops: activations and math functions, arithmetic with numpy broadcasting,
// Pow, Clip and Where.
#include <fmt/format.h>

#include <cfloat>
#include <cmath>
#include <numbers>

#include "reference/op_support.h"

namespace strider::ref {
namespace {

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double clamp01(double v) { return v < 0 ? 0 : (v > 1 ? 1 : v); }

Result<OpOutputs> relu_op(const OpContext& ctx) {
  return unary_numeric(
      ctx, [](double x) { return x < 0 ? 0.0 : x; },
      [](int64_t x) { return x < 0 ? int64_t(0) : x; });
}
Result<OpOutputs> leaky_relu_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(double alpha, ctx.attributes().get_float("alpha", 0.01f));
  return unary_floating(ctx, [alpha](double x) { return x < 0 ? alpha * x : x; });
}
Result<OpOutputs> sigmoid_op(const OpContext& ctx) { return unary_floating(ctx, sigmoid); }
Result<OpOutputs> tanh_op(const OpContext& ctx) {
  return unary_floating(ctx, [](double x) { return std::tanh(x); });
}
Result<OpOutputs> hard_sigmoid_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(double alpha, ctx.attributes().get_float("alpha", 0.2f));
  STRIDER_ASSIGN_OR_RETURN(double beta, ctx.attributes().get_float("beta", 0.5f));
  return unary_floating(ctx, [=](double x) { return clamp01(alpha * x + beta); });
}
Result<OpOutputs> hard_swish_op(const OpContext& ctx) {
  return unary_floating(ctx, [](double x) { return x * clamp01(x / 6.0 + 0.5); });
}
Result<OpOutputs> exp_op(const OpContext& ctx) {
  return unary_floating(ctx, [](double x) { return std::exp(x); });
}
Result<OpOutputs> log_op(const OpContext& ctx) {
  return unary_floating(ctx, [](double x) { return std::log(x); });
}
Result<OpOutputs> sqrt_op(const OpContext& ctx) {
  return unary_floating(ctx, [](double x) { return std::sqrt(x); });
}
Result<OpOutputs> erf_op(const OpContext& ctx) {
  return unary_floating(ctx, [](double x) { return std::erf(x); });
}
Result<OpOutputs> neg_op(const OpContext& ctx) {
  return unary_numeric(
      ctx, [](double x) { return -x; }, [](int64_t x) { return wrapping_sub(0, x); });
}
Result<OpOutputs> abs_op(const OpContext& ctx) {
  return unary_numeric(
      ctx, [](double x) { return std::fabs(x); },
      [](int64_t x) { return x < 0 ? wrapping_sub(0, x) : x; });
}
Result<OpOutputs> floor_op(const OpContext& ctx) {
  return unary_floating(ctx, [](double x) { return std::floor(x); });
}
Result<OpOutputs> ceil_op(const OpContext& ctx) {
  return unary_floating(ctx, [](double x) { return std::ceil(x); });
}
Result<OpOutputs> round_op(const OpContext& ctx) {
  // Halves round to even: nearbyint in the default rounding mode.
  return unary_floating(ctx, [](double x) { return std::nearbyint(x); });
}
Result<OpOutputs> reciprocal_op(const OpContext& ctx) {
  return unary_floating(ctx, [](double x) { return 1.0 / x; });
}
Result<OpOutputs> sign_op(const OpContext& ctx) {
  return unary_numeric(
      ctx, [](double x) { return x > 0 ? 1.0 : (x < 0 ? -1.0 : x); },
      [](int64_t x) { return int64_t(x > 0) - int64_t(x < 0); });
}
Result<OpOutputs> sin_op(const OpContext& ctx) {
  return unary_floating(ctx, [](double x) { return std::sin(x); });
}
Result<OpOutputs> cos_op(const OpContext& ctx) {
  return unary_floating(ctx, [](double x) { return std::cos(x); });
}
Result<OpOutputs> softplus_op(const OpContext& ctx) {
  return unary_floating(ctx, [](double x) { return std::log1p(std::exp(x)); });
}
Result<OpOutputs> softsign_op(const OpContext& ctx) {
  return unary_floating(ctx, [](double x) { return x / (1.0 + std::fabs(x)); });
}
Result<OpOutputs> elu_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(double alpha, ctx.attributes().get_float("alpha", 1.0f));
  return unary_floating(ctx, [alpha](double x) { return x < 0 ? alpha * std::expm1(x) : x; });
}
Result<OpOutputs> selu_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(double alpha,
                           ctx.attributes().get_float("alpha", 1.67326319217681884765625f));
  STRIDER_ASSIGN_OR_RETURN(double gamma,
                           ctx.attributes().get_float("gamma", 1.05070102214813232421875f));
  return unary_floating(
      ctx, [=](double x) { return x <= 0 ? gamma * alpha * std::expm1(x) : gamma * x; });
}
Result<OpOutputs> mish_op(const OpContext& ctx) {
  return unary_floating(ctx, [](double x) { return x * std::tanh(std::log1p(std::exp(x))); });
}
// Gelu's `approximate`: "none" (erf) or "tanh".
Result<bool> gelu_uses_tanh(const AttributeMap& attributes) {
  const Attribute* a = attributes.find("approximate");
  if (a == nullptr) return false;
  if (a->kind == Attribute::Kind::kString && (a->s == "none" || a->s == "tanh"))
    return a->s == "tanh";
  return invalid_model("attribute 'approximate' must be the string none or tanh");
}

Result<OpOutputs> gelu_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(bool use_tanh, gelu_uses_tanh(ctx.attributes()));
  if (!use_tanh)
    return unary_floating(ctx,
                          [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); });
  return unary_floating(ctx, [](double x) {
    double k = std::sqrt(2.0 / std::numbers::pi);
    return 0.5 * x * (1 + std::tanh(k * (x + 0.044715 * x * x * x)));
  });
}

// ---- binary arithmetic ----------------------------------------------------------------

enum class Arithmetic { kAdd, kSub, kMul, kDiv };

double apply_floating(Arithmetic op, double a, double b) {
  switch (op) {
    case Arithmetic::kAdd: return a + b;
    case Arithmetic::kSub: return a - b;
    case Arithmetic::kMul: return a * b;
    case Arithmetic::kDiv: return a / b;
  }
  return 0;
}

// Integer division truncates toward zero, as C does; b != 0 was checked.
int64_t apply_integer(Arithmetic op, int64_t a, int64_t b) {
  switch (op) {
    case Arithmetic::kAdd: return wrapping_add(a, b);
    case Arithmetic::kSub: return wrapping_sub(a, b);
    case Arithmetic::kMul: return wrapping_mul(a, b);
    case Arithmetic::kDiv: return b == -1 ? wrapping_sub(0, a) : a / b;
  }
  return 0;
}

Result<OpOutputs> arithmetic(const OpContext& ctx, Arithmetic op) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* a, ctx.input(0, "A"));
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* b, ctx.input(1, "B"));
  STRIDER_RETURN_IF_ERROR(require_numeric(*a, "input 0 (A)"));
  STRIDER_RETURN_IF_ERROR(require_same_dtype(*a, *b, "input 0 (A)", "input 1 (B)"));
  if (a->is_floating()) {
    STRIDER_ASSIGN_OR_RETURN(
        RefTensor c,
        broadcast_binary(*a, *b, a->dtype, [&](size_t ia, size_t ib, size_t io, RefTensor& out) {
          out.floats[io] = apply_floating(op, a->floats[ia], b->floats[ib]);
        }));
    return OpOutputs{std::move(c)};
  }
  if (op == Arithmetic::kDiv) {
    for (size_t i = 0; i < b->ints.size(); ++i)
      if (b->ints[i] == 0)
        return invalid_argument(
            fmt::format("integer division by zero: input 1 (B) element {} is 0", i));
  }
  STRIDER_ASSIGN_OR_RETURN(
      RefTensor c,
      broadcast_binary(*a, *b, a->dtype, [&](size_t ia, size_t ib, size_t io, RefTensor& out) {
        out.ints[io] = op == Arithmetic::kDiv && a->dtype == DType::kU64
                           ? unsigned_quotient(a->ints[ia], b->ints[ib])
                           : wrap_to_dtype(apply_integer(op, a->ints[ia], b->ints[ib]), out.dtype);
      }));
  return OpOutputs{std::move(c)};
}

Result<OpOutputs> add_op(const OpContext& ctx) { return arithmetic(ctx, Arithmetic::kAdd); }
Result<OpOutputs> sub_op(const OpContext& ctx) { return arithmetic(ctx, Arithmetic::kSub); }
Result<OpOutputs> mul_op(const OpContext& ctx) { return arithmetic(ctx, Arithmetic::kMul); }
Result<OpOutputs> div_op(const OpContext& ctx) { return arithmetic(ctx, Arithmetic::kDiv); }

// Sum, Mean, Min, Max: every input broadcast against the others, folded in input order.
// Min and Max propagate NaN; Mean divides the sum by the number of inputs.
enum class Variadic { kSum, kMean, kMin, kMax };

Result<OpOutputs> variadic(const OpContext& ctx, Variadic op) {
  if (ctx.num_inputs() < 1) return invalid_model("needs at least 1 input");
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* first, ctx.input(0, "data_0"));
  STRIDER_RETURN_IF_ERROR(require_numeric(*first, "input 0"));
  RefTensor acc = *first;
  auto fold_float = [op](double a, double b) {
    if (op == Variadic::kMin || op == Variadic::kMax) {
      if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<double>::quiet_NaN();
      return op == Variadic::kMin ? std::min(a, b) : std::max(a, b);
    }
    return a + b;
  };
  const DType dtype = first->dtype;
  auto fold_int = [op, dtype](int64_t a, int64_t b) {
    return op == Variadic::kMin ? min_of(a, b, dtype) : op == Variadic::kMax ? max_of(a, b, dtype) : wrapping_add(a, b);
  };
  for (size_t i = 1; i < ctx.num_inputs(); ++i) {
    STRIDER_ASSIGN_OR_RETURN(const RefTensor* next, ctx.input(i, "data"));
    STRIDER_RETURN_IF_ERROR(require_same_dtype(acc, *next, "input 0", fmt::format("input {}", i)));
    STRIDER_ASSIGN_OR_RETURN(acc, broadcast_binary(acc, *next, acc.dtype, [&](size_t ia, size_t ib, size_t io, RefTensor& out) {
      if (out.is_floating()) out.floats[io] = fold_float(acc.floats[ia], next->floats[ib]);
      else out.ints[io] = wrap_to_dtype(fold_int(acc.ints[ia], next->ints[ib]), out.dtype);
    }));
  }
  if (op == Variadic::kMean) {
    const int64_t n = int64_t(ctx.num_inputs());
    for (double& v : acc.floats) v /= double(n);
    for (int64_t& v : acc.ints) v /= n;
  }
  return OpOutputs{std::move(acc)};
}

Result<OpOutputs> sum_op(const OpContext& ctx) { return variadic(ctx, Variadic::kSum); }
Result<OpOutputs> mean_op(const OpContext& ctx) { return variadic(ctx, Variadic::kMean); }
Result<OpOutputs> min_op(const OpContext& ctx) { return variadic(ctx, Variadic::kMin); }
Result<OpOutputs> max_op(const OpContext& ctx) { return variadic(ctx, Variadic::kMax); }

// base^exponent for integers, exactly (wrapping); a negative exponent truncates 1/base^n.
Result<int64_t> integer_power(int64_t base, int64_t exponent) {
  if (exponent < 0) {
    if (base == 0) return invalid_argument("integer Pow: 0 raised to a negative exponent");
    if (base == 1) return int64_t(1);
    if (base == -1) return exponent % 2 == 0 ? int64_t(1) : int64_t(-1);
    return int64_t(0);
  }
  int64_t result = 1;
  for (int64_t e = exponent, factor = base; e > 0; e >>= 1) {
    if (e & 1) result = wrapping_mul(result, factor);
    factor = wrapping_mul(factor, factor);
  }
  return result;
}

// Pow: the base's type is the output type; the exponent may have another numeric type.
Result<OpOutputs> pow_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* x, ctx.input(0, "X"));
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* y, ctx.input(1, "Y"));
  STRIDER_RETURN_IF_ERROR(require_numeric(*x, "input 0 (X)"));
  STRIDER_RETURN_IF_ERROR(require_numeric(*y, "input 1 (Y)"));
  Status failure;
  STRIDER_ASSIGN_OR_RETURN(
      RefTensor z,
      broadcast_binary(*x, *y, x->dtype, [&](size_t ix, size_t iy, size_t io, RefTensor& out) {
        if (x->is_floating()) {
          out.floats[io] = std::pow(x->floats[ix], y->element_as_double(int64_t(iy)));
        } else if (!y->is_floating()) {
          Result<int64_t> p = integer_power(x->ints[ix], y->ints[iy]);
          if (!p.is_ok()) failure = p.status();
          out.ints[io] = p.is_ok() ? wrap_to_dtype(*p, out.dtype) : 0;
        } else {
          double p = std::pow(double(x->ints[ix]), y->floats[iy]);
          out.ints[io] = wrap_to_dtype(truncate_to_int(p), out.dtype);
        }
      }));
  STRIDER_RETURN_IF_ERROR(failure);
  return OpOutputs{std::move(z)};
}

// Clip bounds: attributes before opset 11, optional scalar inputs from 11.
struct ClipBounds {
  double low_float = -DBL_MAX, high_float = DBL_MAX;
  int64_t low_int = INT64_MIN, high_int = INT64_MAX;
};

Result<ClipBounds> clip_bounds(const OpContext& ctx, const RefTensor& x) {
  ClipBounds bounds;
  if (ctx.opset() < 11) {
    STRIDER_ASSIGN_OR_RETURN(float low, ctx.attributes().get_float("min", -FLT_MAX));
    STRIDER_ASSIGN_OR_RETURN(float high, ctx.attributes().get_float("max", FLT_MAX));
    bounds.low_float = low;
    bounds.high_float = high;
    return bounds;
  }
  const char* names[2] = {"min", "max"};
  for (size_t i = 1; i <= 2; ++i) {
    const RefTensor* bound = ctx.optional_input(i);
    if (bound == nullptr) continue;
    std::string what = fmt::format("input {} ({})", i, names[i - 1]);
    STRIDER_RETURN_IF_ERROR(require_same_dtype(x, *bound, "input 0 (input)", what));
    STRIDER_ASSIGN_OR_RETURN(double value, read_scalar_double(*bound, what));
    STRIDER_ASSIGN_OR_RETURN(int64_t int_value, read_scalar_int(*bound, what));
    (i == 1 ? bounds.low_float : bounds.high_float) = value;
    (i == 1 ? bounds.low_int : bounds.high_int) = int_value;
  }
  return bounds;
}

// y = min(max(x, min), max): when min > max every element becomes max, as the spec says.
Result<OpOutputs> clip_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* x, ctx.input(0, "input"));
  STRIDER_RETURN_IF_ERROR(require_numeric(*x, "input 0 (input)"));
  STRIDER_ASSIGN_OR_RETURN(ClipBounds b, clip_bounds(ctx, *x));
  RefTensor y = *x;
  for (double& v : y.floats) {
    if (v < b.low_float) v = b.low_float;
    if (v > b.high_float) v = b.high_float;
  }
  for (int64_t& v : y.ints) {
    if (v < b.low_int) v = b.low_int;
    if (v > b.high_int) v = b.high_int;
  }
  return OpOutputs{std::move(y)};
}

Result<OpOutputs> where_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* condition, ctx.input(0, "condition"));
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* x, ctx.input(1, "X"));
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* y, ctx.input(2, "Y"));
  if (condition->dtype != DType::kBool)
    return invalid_model(
        fmt::format("input 0 (condition) is {}, expected bool", dtype_name(condition->dtype)));
  STRIDER_RETURN_IF_ERROR(require_same_dtype(*x, *y, "input 1 (X)", "input 2 (Y)"));
  STRIDER_ASSIGN_OR_RETURN(Shape xy, broadcast_or_error(x->shape, y->shape));
  STRIDER_ASSIGN_OR_RETURN(Shape shape, broadcast_or_error(condition->shape, xy));
  std::vector<int64_t> from_c = broadcast_source_index(condition->shape, shape);
  std::vector<int64_t> from_x = broadcast_source_index(x->shape, shape);
  std::vector<int64_t> from_y = broadcast_source_index(y->shape, shape);
  RefTensor out = RefTensor::zeros(x->dtype, shape);
  for (size_t i = 0; i < from_c.size(); ++i) {
    bool pick_x = condition->ints[size_t(from_c[i])] != 0;
    const RefTensor& source = pick_x ? *x : *y;
    size_t s = size_t(pick_x ? from_x[i] : from_y[i]);
    if (out.is_floating()) {
      out.floats[i] = source.floats[s];
    } else {
      out.ints[i] = source.ints[s];
    }
  }
  return OpOutputs{std::move(out)};
}

constexpr OpDefinition kElementwiseOps[] = {
    {"Relu", 7, 27, relu_op},
    {"LeakyRelu", 7, 27, leaky_relu_op},
    {"Sigmoid", 7, 27, sigmoid_op},
    {"Tanh", 7, 27, tanh_op},
    {"HardSigmoid", 7, 27, hard_sigmoid_op},
    {"HardSwish", 14, 27, hard_swish_op},
    {"Exp", 7, 27, exp_op},
    {"Log", 7, 27, log_op},
    {"Sqrt", 7, 27, sqrt_op},
    {"Erf", 9, 27, erf_op},
    {"Neg", 7, 27, neg_op},
    {"Abs", 7, 27, abs_op},
    {"Floor", 7, 27, floor_op},
    {"Ceil", 7, 27, ceil_op},
    {"Round", 11, 27, round_op},
    {"Reciprocal", 7, 27, reciprocal_op},
    {"Sign", 9, 27, sign_op},
    {"Sin", 7, 27, sin_op},
    {"Cos", 7, 27, cos_op},
    {"Softplus", 7, 27, softplus_op},
    {"Softsign", 7, 27, softsign_op},
    {"Elu", 7, 27, elu_op},
    {"Selu", 7, 27, selu_op},
    {"Mish", 18, 27, mish_op},
    {"Gelu", 20, 27, gelu_op},
    {"Add", 7, 27, add_op},
    {"Sub", 7, 27, sub_op},
    {"Mul", 7, 27, mul_op},
    {"Div", 7, 27, div_op},
    {"Pow", 7, 27, pow_op},
    {"Sum", 8, 27, sum_op},
    {"Mean", 8, 27, mean_op},
    {"Min", 8, 27, min_op},
    {"Max", 8, 27, max_op},
    {"Clip", 7, 27, clip_op},
    {"Where", 9, 27, where_op},
};

}  // namespace

std::span<const OpDefinition> elementwise_op_definitions() { return kElementwiseOps; }

}  // namespace strider::ref
