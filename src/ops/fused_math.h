// The arithmetic of a fused elementwise program (ops/fused_elementwise.h), shared by the
// CPU and CUDA kernels so both compute exactly what the unfused kernels compute: the same
// formulas, in f32, with a result rounded to f32 after every instruction (as the unfused
// f32 kernels store each intermediate). Compiled by nvcc and the host compiler: it
// includes nothing but <cmath>.
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define STRIDER_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define STRIDER_HOST_DEVICE inline
#endif

namespace strider {

// X(name, arity): every op a fused program may hold. Unary ops read operand a; binary
// ops a and b; alpha and beta are the op's attributes (LeakyRelu's alpha, HardSigmoid's
// alpha and beta, Clip's bounds, Elu's alpha).
#define STRIDER_FUSED_OPS(X)                                                              \
  X(Add, 2) X(Sub, 2) X(Mul, 2) X(Div, 2) X(Min, 2) X(Max, 2)                             \
  X(Neg, 1) X(Abs, 1) X(Relu, 1) X(Sigmoid, 1) X(Tanh, 1) X(Exp, 1) X(Log, 1) X(Sqrt, 1) \
  X(Reciprocal, 1) X(Erf, 1) X(Floor, 1) X(Ceil, 1) X(Softplus, 1) X(HardSwish, 1)       \
  X(LeakyRelu, 1) X(HardSigmoid, 1) X(Elu, 1) X(Clip, 1)

enum class FusedOp : uint8_t {
#define STRIDER_FUSED_ENUM(name, arity) k##name,
  STRIDER_FUSED_OPS(STRIDER_FUSED_ENUM)
#undef STRIDER_FUSED_ENUM
};

// Limits that keep one program in a CUDA kernel's parameters.
inline constexpr int kMaxFusedInputs = 8;
inline constexpr int kMaxFusedInstructions = 24;

#define STRIDER_FUSED_COUNT(name, arity) +1
inline constexpr int kFusedOpCount = 0 STRIDER_FUSED_OPS(STRIDER_FUSED_COUNT);
#undef STRIDER_FUSED_COUNT

namespace fused_math {

// std::min / std::max exactly (NaN handling follows them, as in the unfused kernels).
STRIDER_HOST_DEVICE float s_min(float a, float b) { return b < a ? b : a; }
STRIDER_HOST_DEVICE float s_max(float a, float b) { return a < b ? b : a; }

template <FusedOp kOp>
STRIDER_HOST_DEVICE float apply(float a, float b, float alpha, float beta) {
  if constexpr (kOp == FusedOp::kAdd) return a + b;
  else if constexpr (kOp == FusedOp::kSub) return a - b;
  else if constexpr (kOp == FusedOp::kMul) return a * b;
  else if constexpr (kOp == FusedOp::kDiv) return a / b;
  // ONNX Min/Max propagate a NaN in the first operand; the unfused kernels do the same.
  else if constexpr (kOp == FusedOp::kMin) return a != a || a < b ? a : b;
  else if constexpr (kOp == FusedOp::kMax) return a != a || a > b ? a : b;
  else if constexpr (kOp == FusedOp::kNeg) return -a;
  else if constexpr (kOp == FusedOp::kAbs) return a < 0.0f ? -a : a;
  else if constexpr (kOp == FusedOp::kRelu) return a > 0.0f ? a : 0.0f;
  else if constexpr (kOp == FusedOp::kSigmoid) return 1.0f / (1.0f + ::expf(-a));
  else if constexpr (kOp == FusedOp::kTanh) return ::tanhf(a);
  else if constexpr (kOp == FusedOp::kExp) return ::expf(a);
  else if constexpr (kOp == FusedOp::kLog) return ::logf(a);
  else if constexpr (kOp == FusedOp::kSqrt) return ::sqrtf(a);
  else if constexpr (kOp == FusedOp::kReciprocal) return 1.0f / a;
  else if constexpr (kOp == FusedOp::kErf) return ::erff(a);
  else if constexpr (kOp == FusedOp::kFloor) return ::floorf(a);
  else if constexpr (kOp == FusedOp::kCeil) return ::ceilf(a);
  // log(1 + e^x), exact for large x where e^x would overflow.
  else if constexpr (kOp == FusedOp::kSoftplus) return a > 20.0f ? a : ::log1pf(::expf(a));
  else if constexpr (kOp == FusedOp::kHardSwish) return a * s_max(0.0f, s_min(1.0f, a / 6.0f + 0.5f));
  else if constexpr (kOp == FusedOp::kLeakyRelu) return a < 0.0f ? alpha * a : a;
  else if constexpr (kOp == FusedOp::kHardSigmoid) return s_max(0.0f, s_min(1.0f, alpha * a + beta));
  else if constexpr (kOp == FusedOp::kElu) return a < 0.0f ? alpha * (::expf(a) - 1.0f) : a;
  else {  // kClip: min(max(x, low), high), so low > high gives high everywhere, as ONNX says
    float raised = a < alpha ? alpha : a;
    return raised > beta ? beta : raised;
  }
}

// One instruction chosen at run time (the GPU's interpreter; the CPU dispatches once per
// tile instead, see hal/cpu/fused_kernels.cc).
STRIDER_HOST_DEVICE float apply(FusedOp op, float a, float b, float alpha, float beta) {
  switch (op) {
#define STRIDER_FUSED_CASE(name, arity) \
  case FusedOp::k##name: return apply<FusedOp::k##name>(a, b, alpha, beta);
    STRIDER_FUSED_OPS(STRIDER_FUSED_CASE)
#undef STRIDER_FUSED_CASE
  }
  return a;
}

}  // namespace fused_math
}  // namespace strider
