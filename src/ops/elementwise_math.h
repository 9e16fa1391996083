// The scalar math of every elementwise op, defined once. The CPU's map kernel
// (hal/cpu/elementwise_kernels.cc), the CUDA map kernel (hal/cuda/elementwise.cu) and the
// fused-program interpreters of both (hal/cpu/fused_kernels.cc, elementwise.cu) call these
// functors, so an op computes the same formula wherever it runs. The float64 reference
// (src/reference) does not: it is the oracle they are all checked against.
//
// Adding an elementwise op is one row in STRIDER_ELEMENTWISE_OPS and its functor below.
// From the row alone the registry gives it a shape function (ops/elementwise_ops.cc), every
// device a kernel, the fusion pass an instruction, and ops/elementwise_params.cc reads its
// attributes with their ONNX defaults, once, into ElementwiseParams.
//
// Compute types (what C is): f32 for f32, f16 and bf16 storage, f64 for f64, the integer
// type itself for integers (wrapping on overflow: base/wrapping_math.h), bool. A fused
// program computes in f32, rounding after every instruction as the unfused kernels store
// every intermediate. Compiled by nvcc and the host compiler: it includes only the C
// library's math and the host/device helpers.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "base/host_device.h"
#include "base/wrapping_math.h"

namespace strider {

// What an op takes and gives.
enum class ElementwiseKind : uint8_t {
  kFloatUnary,     // T -> T, floating T
  kNumericUnary,   // T -> T, every type but bool
  kNumericBinary,  // T, T -> T, every type but bool (numpy broadcasting)
  kCompare,        // T, T -> bool, every type
  kLogicUnary,     // bool -> bool
  kLogicBinary,    // bool, bool -> bool
  kFloatTest,      // T -> bool, floating T
  kIntegerUnary,   // T -> T, integer T (not bool)
  kIntegerBinary,  // T, T -> T, integer T (not bool; numpy broadcasting)
};

// Who makes the op's kernel: every device, from the functor (kMap), or each device by its
// own code that still calls the functor (kOwn: Clip's bounds are inputs read at run time;
// Min and Max are variadic).
enum class ElementwiseKernel : uint8_t { kMap, kOwn };

// An op's attributes as its functor reads them (which attribute is which: the row's
// parameter list). Resolved once per node by resolve_elementwise_params.
struct ElementwiseParams {
  float alpha = 0;
  float beta = 0;
};

// X(Name, kind, kernel, parameters). Parameters are a parenthesised list of
//   STRIDER_ATTR(field, "attribute", default)   a float or int attribute, or its default;
//   STRIDER_CHOICE(field, "attribute", "a", "b") a string attribute: 0 for "a" (the
//                                                default), 1 for "b", else INVALID_MODEL.
#define STRIDER_ELEMENTWISE_OPS(X)                                                             \
  X(Add, kNumericBinary, kMap, ())                                                             \
  X(Sub, kNumericBinary, kMap, ())                                                             \
  X(Mul, kNumericBinary, kMap, ())                                                             \
  X(Div, kNumericBinary, kMap, ())                                                             \
  X(Mod, kNumericBinary, kMap, (STRIDER_ATTR(alpha, "fmod", 0)))                               \
  X(PRelu, kNumericBinary, kMap, ())                                                           \
  X(Min, kNumericBinary, kOwn, ())                                                             \
  X(Max, kNumericBinary, kOwn, ())                                                             \
  X(Neg, kNumericUnary, kMap, ())                                                              \
  X(Abs, kNumericUnary, kMap, ())                                                              \
  X(Relu, kNumericUnary, kMap, ())                                                             \
  X(Sign, kNumericUnary, kMap, ())                                                             \
  X(Shrink, kNumericUnary, kMap, (STRIDER_ATTR(alpha, "lambd", 0.5f) STRIDER_ATTR(beta, "bias", 0))) \
  X(Clip, kNumericUnary, kOwn, ())                                                             \
  X(Sigmoid, kFloatUnary, kMap, ())                                                            \
  X(Tanh, kFloatUnary, kMap, ())                                                               \
  X(Exp, kFloatUnary, kMap, ())                                                                \
  X(Log, kFloatUnary, kMap, ())                                                                \
  X(Sqrt, kFloatUnary, kMap, ())                                                               \
  X(Reciprocal, kFloatUnary, kMap, ())                                                         \
  X(Erf, kFloatUnary, kMap, ())                                                                \
  X(Floor, kFloatUnary, kMap, ())                                                              \
  X(Ceil, kFloatUnary, kMap, ())                                                               \
  X(Round, kFloatUnary, kMap, ())                                                              \
  X(Sin, kFloatUnary, kMap, ())                                                                \
  X(Cos, kFloatUnary, kMap, ())                                                                \
  X(Tan, kFloatUnary, kMap, ())                                                                \
  X(Asin, kFloatUnary, kMap, ())                                                               \
  X(Acos, kFloatUnary, kMap, ())                                                               \
  X(Atan, kFloatUnary, kMap, ())                                                               \
  X(Sinh, kFloatUnary, kMap, ())                                                               \
  X(Cosh, kFloatUnary, kMap, ())                                                               \
  X(Asinh, kFloatUnary, kMap, ())                                                              \
  X(Acosh, kFloatUnary, kMap, ())                                                              \
  X(Atanh, kFloatUnary, kMap, ())                                                              \
  X(Softplus, kFloatUnary, kMap, ())                                                           \
  X(Softsign, kFloatUnary, kMap, ())                                                           \
  X(HardSwish, kFloatUnary, kMap, ())                                                          \
  X(Mish, kFloatUnary, kMap, ())                                                               \
  X(Gelu, kFloatUnary, kMap, (STRIDER_CHOICE(alpha, "approximate", "none", "tanh")))           \
  X(LeakyRelu, kFloatUnary, kMap, (STRIDER_ATTR(alpha, "alpha", 0.01f)))                       \
  X(ThresholdedRelu, kFloatUnary, kMap, (STRIDER_ATTR(alpha, "alpha", 1.0f)))                  \
  X(HardSigmoid, kFloatUnary, kMap, (STRIDER_ATTR(alpha, "alpha", 0.2f) STRIDER_ATTR(beta, "beta", 0.5f))) \
  X(Elu, kFloatUnary, kMap, (STRIDER_ATTR(alpha, "alpha", 1.0f)))                              \
  X(Celu, kFloatUnary, kMap, (STRIDER_ATTR(alpha, "alpha", 1.0f)))                             \
  X(Selu, kFloatUnary, kMap,                                                                   \
    (STRIDER_ATTR(alpha, "alpha", 1.67326319217681884765625f)                                  \
         STRIDER_ATTR(beta, "gamma", 1.05070102214813232421875f)))                             \
  X(Swish, kFloatUnary, kMap, (STRIDER_ATTR(alpha, "alpha", 1.0f)))                            \
  X(IsNaN, kFloatTest, kMap, ())                                                               \
  X(IsInf, kFloatTest, kMap, (STRIDER_ATTR(alpha, "detect_negative", 1) STRIDER_ATTR(beta, "detect_positive", 1))) \
  X(Equal, kCompare, kMap, ())                                                                 \
  X(Less, kCompare, kMap, ())                                                                  \
  X(Greater, kCompare, kMap, ())                                                               \
  X(LessOrEqual, kCompare, kMap, ())                                                           \
  X(GreaterOrEqual, kCompare, kMap, ())                                                        \
  X(Not, kLogicUnary, kMap, ())                                                                \
  X(And, kLogicBinary, kMap, ())                                                               \
  X(Or, kLogicBinary, kMap, ())                                                                \
  X(Xor, kLogicBinary, kMap, ())                                                               \
  X(BitwiseNot, kIntegerUnary, kMap, ())                                                       \
  X(BitwiseAnd, kIntegerBinary, kMap, ())                                                      \
  X(BitwiseOr, kIntegerBinary, kMap, ())                                                       \
  X(BitwiseXor, kIntegerBinary, kMap, ())                                                      \
  X(BitShift, kIntegerBinary, kMap, (STRIDER_CHOICE(alpha, "direction", "LEFT", "RIGHT")))

enum class ElementwiseOp : uint8_t {
#define STRIDER_ELEMENTWISE_ENUM(name, kind, kernel, params) k##name,
  STRIDER_ELEMENTWISE_OPS(STRIDER_ELEMENTWISE_ENUM)
#undef STRIDER_ELEMENTWISE_ENUM
};

#define STRIDER_ELEMENTWISE_COUNT(name, kind, kernel, params) +1
inline constexpr int kElementwiseOpCount = 0 STRIDER_ELEMENTWISE_OPS(STRIDER_ELEMENTWISE_COUNT);
#undef STRIDER_ELEMENTWISE_COUNT

constexpr int elementwise_arity(ElementwiseKind kind) {
  return kind == ElementwiseKind::kNumericBinary || kind == ElementwiseKind::kCompare ||
                 kind == ElementwiseKind::kLogicBinary || kind == ElementwiseKind::kIntegerBinary
             ? 2
             : 1;
}
// Ops whose result has their operands' type and which are defined on floats: what a fused
// program may hold.
constexpr bool elementwise_fusable(ElementwiseKind kind) {
  return kind == ElementwiseKind::kFloatUnary || kind == ElementwiseKind::kNumericUnary ||
         kind == ElementwiseKind::kNumericBinary;
}

// ---- the C library's math for the float compute types ---------------------------------
namespace scalar {
#define STRIDER_SCALAR_MATH(name)                                                   \
  STRIDER_HOST_DEVICE float name(float x) { return ::name##f(x); }                 \
  STRIDER_HOST_DEVICE double name(double x) { return ::name(x); }
STRIDER_SCALAR_MATH(exp)
STRIDER_SCALAR_MATH(expm1)
STRIDER_SCALAR_MATH(log)
STRIDER_SCALAR_MATH(log1p)
STRIDER_SCALAR_MATH(sqrt)
STRIDER_SCALAR_MATH(erf)
STRIDER_SCALAR_MATH(floor)
STRIDER_SCALAR_MATH(ceil)
STRIDER_SCALAR_MATH(rint)
STRIDER_SCALAR_MATH(sin)
STRIDER_SCALAR_MATH(cos)
STRIDER_SCALAR_MATH(tan)
STRIDER_SCALAR_MATH(asin)
STRIDER_SCALAR_MATH(acos)
STRIDER_SCALAR_MATH(atan)
STRIDER_SCALAR_MATH(sinh)
STRIDER_SCALAR_MATH(cosh)
STRIDER_SCALAR_MATH(tanh)
STRIDER_SCALAR_MATH(asinh)
STRIDER_SCALAR_MATH(acosh)
STRIDER_SCALAR_MATH(atanh)
#undef STRIDER_SCALAR_MATH
STRIDER_HOST_DEVICE float fmod(float a, float b) { return ::fmodf(a, b); }
STRIDER_HOST_DEVICE double fmod(double a, double b) { return ::fmod(a, b); }

// std::min / std::max exactly (NaN handling follows them).
template <class C> STRIDER_HOST_DEVICE C min(C a, C b) { return b < a ? b : a; }
template <class C> STRIDER_HOST_DEVICE C max(C a, C b) { return a < b ? b : a; }
// x < 0, false for unsigned C without comparing (nvcc warns of the pointless comparison).
template <class C> STRIDER_HOST_DEVICE bool is_negative(C x) {
  if constexpr (std::is_unsigned_v<C>) return false;
  else return x < C(0);
}
// +-infinity: neither NaN nor finite (inf - inf is NaN, x - x of a finite x is 0).
template <class C> STRIDER_HOST_DEVICE bool is_infinite(C x) { return x == x && !(x - x == x - x); }
// log(1 + e^x), exact for large x where e^x would overflow.
template <class C> STRIDER_HOST_DEVICE C softplus(C x) { return x > C(20) ? x : log1p(exp(x)); }
template <class C> STRIDER_HOST_DEVICE C sigmoid(C x) { return C(1) / (C(1) + exp(-x)); }
}  // namespace scalar

// ---- the functors ------------------------------------------------------------------------
// Each holds its node's parameters; operator() is templated on the compute type C.
namespace elementwise {

#define STRIDER_UNARY(name, expression)                                              \
  struct name {                                                                      \
    ElementwiseParams p;                                                             \
    template <class C> STRIDER_HOST_DEVICE auto operator()(C x) const { return expression; } \
  };
#define STRIDER_BINARY(name, expression)                                             \
  struct name {                                                                      \
    ElementwiseParams p;                                                             \
    template <class C> STRIDER_HOST_DEVICE auto operator()(C a, C b) const { return expression; } \
  };

STRIDER_BINARY(Add, wrapping_add(a, b))
STRIDER_BINARY(Sub, wrapping_sub(a, b))
STRIDER_BINARY(Mul, wrapping_mul(a, b))
// ONNX Min/Max propagate a NaN in the first operand.
STRIDER_BINARY(Min, (a != a || a < b ? a : b))
STRIDER_BINARY(Max, (a != a || a > b ? a : b))
STRIDER_BINARY(PRelu, (scalar::is_negative(a) ? wrapping_mul(b, a) : a))

struct Div {
  ElementwiseParams p;
  template <class C> STRIDER_HOST_DEVICE C operator()(C a, C b) const {
    if constexpr (std::is_integral_v<C>) {
      // Integer division by zero and MIN / -1 would trap: defined instead of crashing.
      if (b == C(0)) return C(0);
      if (std::is_signed_v<C> && b == C(-1)) return wrapping_neg(a);
    }
    return C(a / b);
  }
};

// Mod: fmod = 1 is C's remainder (the sign of the dividend), fmod = 0 Python's (the sign of
// the divisor). An integer remainder by 0 is 0, as is one by -1 (MIN % -1 would trap).
struct Mod {
  ElementwiseParams p;
  template <class C> STRIDER_HOST_DEVICE C operator()(C a, C b) const {
    C r;
    if constexpr (std::is_integral_v<C>) {
      if (b == C(0) || (std::is_signed_v<C> && b == C(-1))) return C(0);
      r = C(a % b);
    } else {
      r = scalar::fmod(a, b);
    }
    if (p.alpha == 0 && r != C(0) && (scalar::is_negative(r) != scalar::is_negative(b))) r = C(r + b);
    return r;
  }
};

// The bitwise ops are defined on integers only (their kind's kernels instantiate nothing
// else); a float C gets its operand back so the functor compiles in generic code.
#define STRIDER_BITWISE_BINARY(name, op)                                             \
  struct name {                                                                      \
    ElementwiseParams p;                                                             \
    template <class C> STRIDER_HOST_DEVICE C operator()(C a, C b) const {            \
      if constexpr (std::is_integral_v<C>) return C(a op b);                         \
      else return a;                                                                 \
    }                                                                                \
  };
STRIDER_BITWISE_BINARY(BitwiseAnd, &)
STRIDER_BITWISE_BINARY(BitwiseOr, |)
STRIDER_BITWISE_BINARY(BitwiseXor, ^)
#undef STRIDER_BITWISE_BINARY
struct BitwiseNot {
  ElementwiseParams p;
  template <class C> STRIDER_HOST_DEVICE C operator()(C x) const {
    if constexpr (std::is_integral_v<C>) return C(~x);
    else return x;
  }
};
// BitShift (unsigned types in ONNX): direction LEFT (alpha 0) or RIGHT (1); a shift by the
// type's width or more gives 0, where C++ would make it undefined.
struct BitShift {
  ElementwiseParams p;
  template <class C> STRIDER_HOST_DEVICE C operator()(C a, C b) const {
    if constexpr (std::is_integral_v<C>) {
      // The operand's own bits (a signed one is not sign-extended), as the reference shifts.
      const uint64_t amount = uint64_t(b), value = uint64_t(std::make_unsigned_t<C>(a));
      if (amount >= 8 * sizeof(C)) return C(0);
      return C(p.alpha == 0 ? value << amount : value >> amount);
    } else {
      return a;
    }
  }
};

STRIDER_UNARY(Neg, wrapping_neg(x))
STRIDER_UNARY(Abs, (scalar::is_negative(x) ? wrapping_neg(x) : x))
STRIDER_UNARY(Relu, (x > C(0) ? x : C(0)))
// NaN and +-0 pass through.
STRIDER_UNARY(Sign, (x > C(0) ? C(1) : (scalar::is_negative(x) ? C(-1) : x)))
// A real number as integer type C, defined for every value: truncated toward zero (NaN as 0),
// saturated to int64, then wrapped to C's width, as the reference narrows integer results.
template <class C>
STRIDER_HOST_DEVICE C real_to_integer(double v) {
  if (!(v == v)) return C(0);
  const int64_t i = v >= 0x1p63 ? INT64_MAX : (v < -0x1p63 ? INT64_MIN : int64_t(v));
  return C(uint64_t(i));
}

// On integers the thresholds and the bias are real numbers (lambd 1.5 on uint8): compared and
// added in double, as ONNX's reference does, never converted to C first.
struct Shrink {
  ElementwiseParams p;
  template <class C>
  STRIDER_HOST_DEVICE C operator()(C x) const {
    if constexpr (std::is_integral_v<C>) {
      const double v = double(x);
      return real_to_integer<C>(v < -p.alpha ? v + p.beta : (v > p.alpha ? v - p.beta : 0.0));
    } else {
      return x < C(-p.alpha) ? C(x + C(p.beta)) : (x > C(p.alpha) ? C(x - C(p.beta)) : C(0));
    }
  }
};
// min(max(x, low), high), so low > high gives high everywhere, as ONNX says. Fused programs
// carry the bounds as alpha and beta; the unfused kernels read them from Clip's inputs.
struct Clip {
  ElementwiseParams p;
  template <class C> STRIDER_HOST_DEVICE C operator()(C x) const {
    C raised = x < C(p.alpha) ? C(p.alpha) : x;
    return raised > C(p.beta) ? C(p.beta) : raised;
  }
};

STRIDER_UNARY(Sigmoid, scalar::sigmoid(x))
STRIDER_UNARY(Tanh, scalar::tanh(x))
STRIDER_UNARY(Exp, scalar::exp(x))
STRIDER_UNARY(Log, scalar::log(x))
STRIDER_UNARY(Sqrt, scalar::sqrt(x))
STRIDER_UNARY(Reciprocal, C(1) / x)
STRIDER_UNARY(Erf, scalar::erf(x))
STRIDER_UNARY(Floor, scalar::floor(x))
STRIDER_UNARY(Ceil, scalar::ceil(x))
// Halves to even: rint in the default rounding mode.
STRIDER_UNARY(Round, scalar::rint(x))
STRIDER_UNARY(Sin, scalar::sin(x))
STRIDER_UNARY(Cos, scalar::cos(x))
STRIDER_UNARY(Tan, scalar::tan(x))
STRIDER_UNARY(Asin, scalar::asin(x))
STRIDER_UNARY(Acos, scalar::acos(x))
STRIDER_UNARY(Atan, scalar::atan(x))
STRIDER_UNARY(Sinh, scalar::sinh(x))
STRIDER_UNARY(Cosh, scalar::cosh(x))
STRIDER_UNARY(Asinh, scalar::asinh(x))
STRIDER_UNARY(Acosh, scalar::acosh(x))
STRIDER_UNARY(Atanh, scalar::atanh(x))
STRIDER_UNARY(Softplus, scalar::softplus(x))
STRIDER_UNARY(Softsign, x / (C(1) + (x < C(0) ? -x : x)))
STRIDER_UNARY(HardSwish, x * scalar::max(C(0), scalar::min(C(1), x / C(6) + C(0.5))))
STRIDER_UNARY(Mish, x * scalar::tanh(scalar::softplus(x)))
// approximate "none" (alpha 0): x/2 (1 + erf(x / sqrt 2)); "tanh" (alpha 1):
// x/2 (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))).
STRIDER_UNARY(Gelu, p.alpha == 0
                        ? C(0.5) * x * (C(1) + scalar::erf(x * C(0.70710678118654752440)))
                        : C(0.5) * x * (C(1) + scalar::tanh(C(0.79788456080286535588) * (x + C(0.044715) * x * x * x))))
STRIDER_UNARY(LeakyRelu, (x < C(0) ? C(p.alpha) * x : x))
STRIDER_UNARY(ThresholdedRelu, (x > C(p.alpha) ? x : C(0)))
STRIDER_UNARY(HardSigmoid, scalar::max(C(0), scalar::min(C(1), C(p.alpha) * x + C(p.beta))))
STRIDER_UNARY(Elu, (x < C(0) ? C(p.alpha) * (scalar::exp(x) - C(1)) : x))
// max(0, x) + min(0, alpha (e^(x / alpha) - 1))
STRIDER_UNARY(Celu, (x > C(0) ? x : C(p.alpha) * (scalar::exp(x / C(p.alpha)) - C(1))))
// beta holds gamma
STRIDER_UNARY(Selu, C(p.beta) * (x > C(0) ? x : C(p.alpha) * (scalar::exp(x) - C(1))))
STRIDER_UNARY(Swish, x * scalar::sigmoid(C(p.alpha) * x))

STRIDER_UNARY(IsNaN, x != x)
// alpha: detect_negative, beta: detect_positive
STRIDER_UNARY(IsInf, scalar::is_infinite(x) && (x > C(0) ? p.beta != 0 : p.alpha != 0))

STRIDER_BINARY(Equal, a == b)
STRIDER_BINARY(Less, a < b)
STRIDER_BINARY(Greater, a > b)
STRIDER_BINARY(LessOrEqual, a <= b)
STRIDER_BINARY(GreaterOrEqual, a >= b)
STRIDER_UNARY(Not, !x)
STRIDER_BINARY(And, a && b)
STRIDER_BINARY(Or, a || b)
STRIDER_BINARY(Xor, a != b)

#undef STRIDER_UNARY
#undef STRIDER_BINARY

}  // namespace elementwise

// The functor type, kind and kernel of an op, for code generated from the table.
template <ElementwiseOp kOp> struct ElementwiseTraits;
#define STRIDER_ELEMENTWISE_TRAITS(name, kind_, kernel_, params)              \
  template <> struct ElementwiseTraits<ElementwiseOp::k##name> {              \
    using Fn = elementwise::name;                                             \
    static constexpr ElementwiseKind kKind = ElementwiseKind::kind_;          \
    static constexpr ElementwiseKernel kKernel = ElementwiseKernel::kernel_;  \
  };
STRIDER_ELEMENTWISE_OPS(STRIDER_ELEMENTWISE_TRAITS)
#undef STRIDER_ELEMENTWISE_TRAITS

// ---- fused programs ------------------------------------------------------------------------
// The ops a fused program (ops/fused_elementwise.h) holds are the fusable rows of the table.
using FusedOp = ElementwiseOp;

// Limits that keep one program in a CUDA kernel's parameters.
inline constexpr int kMaxFusedInputs = 8;
inline constexpr int kMaxFusedInstructions = 24;

namespace fused_math {

// One instruction in f32; b is ignored by unary ops.
template <FusedOp kOp>
STRIDER_HOST_DEVICE float apply(float a, float b, float alpha, float beta) {
  using Traits = ElementwiseTraits<kOp>;
  const typename Traits::Fn fn{ElementwiseParams{alpha, beta}};
  if constexpr (!elementwise_fusable(Traits::kKind)) return a;  // never in a program
  else if constexpr (elementwise_arity(Traits::kKind) == 1) return float(fn(a));
  else return float(fn(a, b));
}

// One instruction chosen at run time (the GPU's interpreter; the CPU dispatches once per
// tile instead, see hal/cpu/fused_kernels.cc).
STRIDER_HOST_DEVICE float apply(FusedOp op, float a, float b, float alpha, float beta) {
  switch (op) {
#define STRIDER_FUSED_CASE(name, kind, kernel, params) \
  case FusedOp::k##name: return apply<FusedOp::k##name>(a, b, alpha, beta);
    STRIDER_ELEMENTWISE_OPS(STRIDER_FUSED_CASE)
#undef STRIDER_FUSED_CASE
  }
  return a;
}

}  // namespace fused_math
}  // namespace strider
