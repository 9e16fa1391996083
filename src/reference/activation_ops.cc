// Elementwise ops added with the table of ops/elementwise_math.h that the original families
// did not have: inverse and hyperbolic trigonometry, Celu, ThresholdedRelu, Shrink, Swish,
// the float tests IsNaN and IsInf, Mod and PRelu. Written from the ONNX operator
// definitions in float64, independent of the functors the devices share.
#include <cmath>

#include "reference/op_support.h"

namespace strider::ref {
namespace {

template <double (*kFn)(double)>
Result<OpOutputs> math_op(const OpContext& ctx) {
  return unary_floating(ctx, [](double x) { return kFn(x); });
}

double tan_of(double x) { return std::tan(x); }
double asin_of(double x) { return std::asin(x); }
double acos_of(double x) { return std::acos(x); }
double atan_of(double x) { return std::atan(x); }
double sinh_of(double x) { return std::sinh(x); }
double cosh_of(double x) { return std::cosh(x); }
double asinh_of(double x) { return std::asinh(x); }
double acosh_of(double x) { return std::acosh(x); }
double atanh_of(double x) { return std::atanh(x); }

Result<OpOutputs> celu_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(double alpha, ctx.attributes().get_float("alpha", 1.0f));
  return unary_floating(ctx, [alpha](double x) { return std::max(0.0, x) + std::min(0.0, alpha * std::expm1(x / alpha)); });
}

Result<OpOutputs> thresholded_relu_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(double alpha, ctx.attributes().get_float("alpha", 1.0f));
  return unary_floating(ctx, [alpha](double x) { return x > alpha ? x : 0.0; });
}

Result<OpOutputs> shrink_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(double lambd, ctx.attributes().get_float("lambd", 0.5f));
  STRIDER_ASSIGN_OR_RETURN(double bias, ctx.attributes().get_float("bias", 0.0f));
  auto shrink = [=](double x) { return x < -lambd ? x + bias : (x > lambd ? x - bias : 0.0); };
  return unary_numeric(ctx, shrink, [=](int64_t x) { return truncate_to_int(shrink(double(x))); });
}

Result<OpOutputs> swish_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(double alpha, ctx.attributes().get_float("alpha", 1.0f));
  return unary_floating(ctx, [alpha](double x) { return x / (1.0 + std::exp(-alpha * x)); });
}

// SwiGLU: a * sigmoid(alpha * a) * b, b broadcast against a.
Result<OpOutputs> swiglu_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* a, ctx.input(0, "A"));
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* b, ctx.input(1, "B"));
  STRIDER_RETURN_IF_ERROR(require_floating(*a, "input 0 (A)"));
  STRIDER_RETURN_IF_ERROR(require_same_dtype(*a, *b, "input 0 (A)", "input 1 (B)"));
  STRIDER_ASSIGN_OR_RETURN(double alpha, ctx.attributes().get_float("alpha", 1.0f));
  STRIDER_ASSIGN_OR_RETURN(
      RefTensor y, broadcast_binary(*a, *b, a->dtype, [&](size_t ia, size_t ib, size_t io, RefTensor& out) {
        const double x = a->floats[ia];
        out.floats[io] = x / (1.0 + std::exp(-alpha * x)) * b->floats[ib];
      }));
  return OpOutputs{std::move(y)};
}

// A bool tensor: test(x) per element of a floating x.
template <typename Test>
Result<OpOutputs> float_test(const OpContext& ctx, Test test) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* x, ctx.input(0, "X"));
  STRIDER_RETURN_IF_ERROR(require_floating(*x, "input 0 (X)"));
  RefTensor y = RefTensor::zeros(DType::kBool, x->shape);
  for (size_t i = 0; i < x->floats.size(); ++i) y.ints[i] = test(x->floats[i]) ? 1 : 0;
  return OpOutputs{std::move(y)};
}

Result<OpOutputs> is_nan_op(const OpContext& ctx) {
  return float_test(ctx, [](double x) { return std::isnan(x); });
}

Result<OpOutputs> is_inf_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(int64_t negative, ctx.attributes().get_int("detect_negative", 1));
  STRIDER_ASSIGN_OR_RETURN(int64_t positive, ctx.attributes().get_int("detect_positive", 1));
  return float_test(ctx, [=](double x) { return std::isinf(x) && (x > 0 ? positive != 0 : negative != 0); });
}

// Mod: fmod = 1 takes the dividend's sign (C's fmod), fmod = 0 the divisor's (Python's %).
// An integer remainder by 0 is an error here (ONNX leaves it undefined).
Result<OpOutputs> mod_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* a, ctx.input(0, "A"));
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* b, ctx.input(1, "B"));
  STRIDER_ASSIGN_OR_RETURN(int64_t fmod, ctx.attributes().get_int("fmod", 0));
  STRIDER_RETURN_IF_ERROR(require_numeric(*a, "input 0 (A)"));
  STRIDER_RETURN_IF_ERROR(require_same_dtype(*a, *b, "input 0 (A)", "input 1 (B)"));
  if (!a->is_floating())
    for (size_t i = 0; i < b->ints.size(); ++i)
      if (b->ints[i] == 0) return invalid_argument("integer Mod by zero: input 1 (B) element " + std::to_string(i) + " is 0");
  auto python_sign = [fmod](auto r, auto divisor) {
    using T = decltype(r);
    return fmod == 0 && r != T(0) && ((r < T(0)) != (divisor < T(0))) ? T(r + divisor) : r;
  };
  STRIDER_ASSIGN_OR_RETURN(
      RefTensor c, broadcast_binary(*a, *b, a->dtype, [&](size_t ia, size_t ib, size_t io, RefTensor& out) {
        if (a->is_floating()) {
          out.floats[io] = python_sign(std::fmod(a->floats[ia], b->floats[ib]), b->floats[ib]);
        } else {
          int64_t x = a->ints[ia], y = b->ints[ib];
          if (a->dtype == DType::kU64) {  // unsigned: no sign to fix
            out.ints[io] = unsigned_remainder(x, y);
            return;
          }
          int64_t r = y == -1 ? 0 : x % y;
          out.ints[io] = wrap_to_dtype(python_sign(r, y), out.dtype);
        }
      }));
  return OpOutputs{std::move(c)};
}

// PRelu: x < 0 ? slope * x : x, the slope broadcast to X.
Result<OpOutputs> prelu_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* x, ctx.input(0, "X"));
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* slope, ctx.input(1, "slope"));
  STRIDER_RETURN_IF_ERROR(require_numeric(*x, "input 0 (X)"));
  STRIDER_RETURN_IF_ERROR(require_same_dtype(*x, *slope, "input 0 (X)", "input 1 (slope)"));
  STRIDER_ASSIGN_OR_RETURN(
      RefTensor y, broadcast_binary(*x, *slope, x->dtype, [&](size_t ix, size_t is, size_t io, RefTensor& out) {
        if (x->is_floating()) {
          double v = x->floats[ix];
          out.floats[io] = v < 0 ? slope->floats[is] * v : v;
        } else {
          int64_t v = x->ints[ix];
          out.ints[io] = wrap_to_dtype(v < 0 ? wrapping_mul(slope->ints[is], v) : v, out.dtype);
        }
      }));
  if (y.shape != x->shape) return invalid_model("slope does not broadcast to X's shape");
  return OpOutputs{std::move(y)};
}

constexpr OpDefinition kActivationOps[] = {
    {"Tan", 7, 27, math_op<tan_of>},
    {"Asin", 7, 27, math_op<asin_of>},
    {"Acos", 7, 27, math_op<acos_of>},
    {"Atan", 7, 27, math_op<atan_of>},
    {"Sinh", 9, 27, math_op<sinh_of>},
    {"Cosh", 9, 27, math_op<cosh_of>},
    {"Asinh", 9, 27, math_op<asinh_of>},
    {"Acosh", 9, 27, math_op<acosh_of>},
    {"Atanh", 9, 27, math_op<atanh_of>},
    {"Celu", 12, 27, celu_op},
    {"ThresholdedRelu", 10, 27, thresholded_relu_op},
    {"Shrink", 9, 27, shrink_op},
    {"Swish", 24, 27, swish_op},
    {"SwiGLU", 24, 28, swiglu_op},  // the node tests declare opset 28
    {"IsNaN", 9, 27, is_nan_op},
    {"IsInf", 10, 27, is_inf_op},
    {"Mod", 10, 27, mod_op},
    {"PRelu", 7, 27, prelu_op},
};

}  // namespace

std::span<const OpDefinition> activation_op_definitions() { return kActivationOps; }

}  // namespace strider::ref
