// The arithmetic of the reductions, defined once for the CPU and CUDA kernels: each
// element is mapped (|x| for L1, x^2 for L2 and SumSquare, e^(x - max) for LogSumExp),
// combined (sum, product, NaN-sticky max or min), and the result finished (mean, square
// root, logarithm, + max). LogSumExp subtracts the row's maximum first, so it does not
// overflow where e^x would. A is the accumulator type: f32 for f32/f16/bf16, f64 for f64,
// int64 for integers (which wrap); the float-only ops (L2, LogSum, LogSumExp) are refused
// for integer inputs by the kernels. Compiled by nvcc and the host compiler.
#pragma once

#include <cmath>
#include <cstdint>
#include <string_view>
#include <type_traits>

#include "base/host_device.h"
#include "base/wrapping_math.h"
#include "ops/elementwise_math.h"

namespace strider {

enum class ReduceMath : uint8_t { kSum, kMean, kMax, kMin, kProd, kL1, kL2, kSumSquare, kLogSum, kLogSumExp };

// The ONNX op of each, for the devices' registrations.
#define STRIDER_REDUCE_OPS(X)                                                                          \
  X(kSum, "ReduceSum") X(kMean, "ReduceMean") X(kMax, "ReduceMax") X(kMin, "ReduceMin")               \
  X(kProd, "ReduceProd") X(kL1, "ReduceL1") X(kL2, "ReduceL2") X(kSumSquare, "ReduceSumSquare")       \
  X(kLogSum, "ReduceLogSum") X(kLogSumExp, "ReduceLogSumExp")

constexpr bool reduce_is_float_only(ReduceMath op) {
  return op == ReduceMath::kL2 || op == ReduceMath::kLogSum || op == ReduceMath::kLogSumExp;
}
constexpr bool reduce_needs_max(ReduceMath op) { return op == ReduceMath::kLogSumExp; }

template <class A>
STRIDER_HOST_DEVICE A reduce_map(ReduceMath op, A x, A row_max) {
  if (op == ReduceMath::kL1) return x < A(0) ? wrapping_neg(x) : x;
  if (op == ReduceMath::kL2 || op == ReduceMath::kSumSquare) return wrapping_mul(x, x);
  if constexpr (std::is_floating_point_v<A>)
    if (op == ReduceMath::kLogSumExp) return scalar::exp(x - row_max);
  return x;
}

template <class A>
STRIDER_HOST_DEVICE A reduce_combine(ReduceMath op, A acc, A x) {
  switch (op) {
    case ReduceMath::kMax: return (x > acc || x != x) ? x : acc;
    case ReduceMath::kMin: return (x < acc || x != x) ? x : acc;
    case ReduceMath::kProd: return wrapping_mul(acc, x);
    default: return wrapping_add(acc, x);
  }
}

template <class A>
STRIDER_HOST_DEVICE A reduce_finish(ReduceMath op, A acc, int64_t count, A row_max) {
  if (op == ReduceMath::kMean) return count ? A(acc / A(count)) : A(0);
  if constexpr (std::is_floating_point_v<A>) {
    if (op == ReduceMath::kL2) return scalar::sqrt(acc);
    if (op == ReduceMath::kLogSum) return scalar::log(acc);
    if (op == ReduceMath::kLogSumExp) return count ? scalar::log(acc) + row_max : scalar::log(acc);
  }
  return acc;
}

// ArgMax / ArgMin: whether `x`, at a later index, replaces the running extreme `best`. A
// NaN counts as the extreme (numpy's rule): the first one wins, or the last with `last`.
template <class A>
STRIDER_HOST_DEVICE bool arg_reduce_takes(bool max, bool last, A x, A best) {
  if (best != best) return last && x != x;
  if (x != x) return true;
  return max ? (last ? x >= best : x > best) : (last ? x <= best : x < best);
}

// TopK: whether element (a, at index ia) comes before (b, ib) in TopK's output: the larger
// first (the smaller with largest = 0), a NaN counting as the largest value (as for
// ArgMax), and of equal values the one at the lower index (ONNX's rule).
template <class A>
STRIDER_HOST_DEVICE bool topk_before(bool largest, A a, int64_t ia, A b, int64_t ib) {
  const bool a_nan = a != a, b_nan = b != b;
  if (a_nan || b_nan) return a_nan && b_nan ? ia < ib : (a_nan == largest);
  if (a == b) return ia < ib;
  return largest ? a > b : a < b;
}

}  // namespace strider
