// The compiled forms of FusedElementwise programs (elementwise.cu's map and row kernels):
// the programs that make up nearly every fused group in detectors, gated stacks and
// transformers run as compiled functors instead of through the interpreter, which is
// latency-bound (a switch and a local-memory register file per instruction: 33.7 us
// against 17.5 + 22.0 us for the unfused Sigmoid and Mul on [1,64,320,320] f32). Each
// computes exactly what the instructions compute: the instructions' own scalar math
// (fused_math::apply), products and sums rounded separately (no FMA contraction).
//
// A functor reads its operands at fixed positions. The host side (match_pattern) finds
// which input plays which part and order_inputs_by_slot moves the launch's inputs there:
// picking operand i of five by a run-time slot cost 8 instructions an element, a quarter
// of BERT's GELU.
//
// Included by elementwise.cu only (inside its anonymous namespace's enclosing namespace).
#pragma once

#include "hal/cuda/launch.h"

namespace strider::cuda::fused_forms {

enum Pattern : uint8_t {
  kInterpreted, kSilu, kResidualSilu, kGated, kResidualGated, kBiasGeluErf, kBiasGeluTanh, kSiluGate, kMulAdd, kMulSub,
  kAddThree
};

__device__ __forceinline__ float sigmoid_f32(float x) { return 1.0f / (1.0f + expf(-x)); }

struct NoParams {
  __device__ explicit NoParams(const MapParams&) {}
};

// x * sigmoid(x)
struct Silu : NoParams { using NoParams::NoParams;
  __device__ float operator()(float x) const { return __fmul_rn(x, sigmoid_f32(x)); } };

// h + x * sigmoid(x)
struct ResidualSilu : NoParams { using NoParams::NoParams;
  __device__ float operator()(float x, float h) const { return __fadd_rn(h, __fmul_rn(x, sigmoid_f32(x))); } };

// tanh(a) * sigmoid(b) (+ h)
template <bool kResidual>
struct Gated : NoParams { using NoParams::NoParams;
  template <class... C>
  __device__ float operator()(float a, float b, C... h) const {
    static_assert(sizeof...(C) == (kResidual ? 1 : 0));
    const float y = __fmul_rn(tanhf(a), sigmoid_f32(b));
    if constexpr (kResidual) return __fadd_rn(y, float(h...));
    else return y;
  }
};

// BERT's GELU after its bias, as torch exports it: with s = x + bias,
// (s * (erf(s / c) + one)) * half, c = sqrt 2, one = 1, half = 0.5 as operands (their
// values are the program's business, so any constants compute right), in the program's
// order. The interpreter took 60 us for BERT's [32 x 128, 1024] bf16 (6% of the H200's
// memory bandwidth).
struct BiasGeluErf : NoParams { using NoParams::NoParams;
  __device__ float operator()(float x, float bias, float c, float one, float half) const {
    using fused_math::apply;
    const float s = apply<FusedOp::kAdd>(x, bias, 0, 0);
    const float e = apply<FusedOp::kErf>(apply<FusedOp::kDiv>(s, c, 0, 0), 0, 0, 0);
    const float m = apply<FusedOp::kMul>(s, apply<FusedOp::kAdd>(e, one, 0, 0), 0, 0);
    return apply<FusedOp::kMul>(m, half, 0, 0);
  }
};

// kBiasGeluTanhExpression (launch.h), the tree as written, operand by operand: with
// s = x0 + x1, x5 * (s * (x4 + tanh(x3 * (s + x2 * (s * (s * s)))))). The interpreter took
// 80 us for GPT-2's [4096, 1024] bf16 (4% of the H200's memory bandwidth).
struct BiasGeluTanh : NoParams { using NoParams::NoParams;
  __device__ float operator()(float x0, float x1, float x2, float x3, float x4, float x5) const {
    using fused_math::apply;
    const float s = apply<FusedOp::kAdd>(x0, x1, 0, 0);
    const float cube = apply<FusedOp::kMul>(s, apply<FusedOp::kMul>(s, s, 0, 0), 0, 0);
    const float inner = apply<FusedOp::kAdd>(s, apply<FusedOp::kMul>(x2, cube, 0, 0), 0, 0);
    const float t = apply<FusedOp::kTanh>(apply<FusedOp::kMul>(x3, inner, 0, 0), 0, 0, 0);
    const float g = apply<FusedOp::kMul>(s, apply<FusedOp::kAdd>(x4, t, 0, 0), 0, 0);
    return apply<FusedOp::kMul>(x5, g, 0, 0);
  }
};

// kSiluGateExpression: (x0 * sigmoid(x0)) * x1, as the interpreter's instructions.
struct SiluGate : NoParams { using NoParams::NoParams;
  __device__ float operator()(float gate, float up) const {
    using fused_math::apply;
    const float silu = apply<FusedOp::kMul>(gate, apply<FusedOp::kSigmoid>(gate, 0, 0, 0), 0, 0);
    return apply<FusedOp::kMul>(silu, up, 0, 0);
  }
};

// kMulAddExpression: x0 * x1 + x2 * x3, each product rounded (a rotary embedding).
struct MulAdd : NoParams { using NoParams::NoParams;
  __device__ float operator()(float x0, float x1, float x2, float x3) const {
    using fused_math::apply;
    return apply<FusedOp::kAdd>(apply<FusedOp::kMul>(x0, x1, 0, 0), apply<FusedOp::kMul>(x2, x3, 0, 0), 0, 0);
  }
};

// kMulSubExpression: x0 * x1 - x2 * x3, each product rounded (a rotary embedding's first half).
struct MulSub : NoParams { using NoParams::NoParams;
  __device__ float operator()(float x0, float x1, float x2, float x3) const {
    using fused_math::apply;
    return apply<FusedOp::kSub>(apply<FusedOp::kMul>(x0, x1, 0, 0), apply<FusedOp::kMul>(x2, x3, 0, 0), 0, 0);
  }
};

// kAddThreeExpression: (x0 + x1) + x2, each sum rounded.
struct AddThree : NoParams { using NoParams::NoParams;
  __device__ float operator()(float x0, float x1, float x2) const {
    using fused_math::apply;
    return apply<FusedOp::kAdd>(apply<FusedOp::kAdd>(x0, x1, 0, 0), x2, 0, 0);
  }
};

// ---- host side: which form a program is, and which input plays which part --------------
inline bool is_op(const FusedCode& c, int j, FusedOp op) { return FusedOp(c.op[j]) == op; }
// Instruction j reads registers r1 and r2, in either order.
inline bool reads(const FusedCode& c, int j, int r1, int r2) {
  return (c.a[j] == r1 && c.b[j] == r2) || (c.a[j] == r2 && c.b[j] == r1);
}

// tanh(a) * sigmoid(b) (+ h): slots a, b (, h).
inline bool match_gated(FusedCode& c, int n) {
  if (!((n == 2 && c.count == 3) || (n == 3 && c.count == 4))) return false;
  int tanh_at = is_op(c, 0, FusedOp::kTanh) ? 0 : 1;
  if (!is_op(c, tanh_at, FusedOp::kTanh) || !is_op(c, 1 - tanh_at, FusedOp::kSigmoid)) return false;
  int a = c.a[tanh_at], b = c.a[1 - tanh_at], h = 3 - a - b;
  if (a == b || a >= n || b >= n || !is_op(c, 2, FusedOp::kMul) || !reads(c, 2, n, n + 1)) return false;
  if (c.count == 4 && (!is_op(c, 3, FusedOp::kAdd) || !reads(c, 3, n + 2, h) || h == a || h == b)) return false;
  c.slot[0] = int8_t(a);
  c.slot[1] = int8_t(b);
  c.slot[2] = int8_t(h);
  return true;
}

// BiasGeluErf's program: Add(x, bias), Div(., c), Erf, Add(., one), Mul(s, .),
// Mul(., half), each input read once (Add and Mul in either operand order: IEEE sums
// and products commute). Slots x, bias, c, one, half.
inline bool match_bias_gelu_erf(FusedCode& c, int n) {
  constexpr FusedOp kOps[] = {FusedOp::kAdd, FusedOp::kDiv, FusedOp::kErf, FusedOp::kAdd, FusedOp::kMul, FusedOp::kMul};
  if (n != 5 || c.count != 6) return false;
  for (int j = 0; j < 6; ++j)
    if (!is_op(c, j, kOps[j])) return false;
  const auto other = [&](int j, int reg) { return c.a[j] == reg ? c.b[j] : c.b[j] == reg ? c.a[j] : -1; };
  const int x = c.a[0], bias = c.b[0], divisor = c.b[1], one = other(3, n + 2), half = other(5, n + 4);
  if (c.a[1] != n || c.a[2] != n + 1 || !reads(c, 4, n, n + 3)) return false;
  const int used[5] = {x, bias, divisor, one, half};
  for (int i = 0; i < 5; ++i) {
    if (used[i] < 0 || used[i] >= n) return false;
    for (int k = 0; k < i; ++k)
      if (used[k] == used[i]) return false;
    c.slot[i] = int8_t(used[i]);
  }
  return true;
}

// Which compiled form runs the program of `n` inputs; fills slot[i] with the input that
// is the functor's operand i (identity for the forms matched by their text, whose
// operands the kernel's maker already put in the text's order: epilogue.h).
inline Pattern match_pattern(FusedCode& c, int n) {
  for (int i = 0; i < 5; ++i) c.slot[i] = int8_t(i);
  if (c.form == FusedForm::kBiasGeluTanh && n == 6) return kBiasGeluTanh;
  if (c.form == FusedForm::kSiluGate && n == 2) return kSiluGate;
  if (c.form == FusedForm::kMulAdd && n == 4) return kMulAdd;
  if (c.form == FusedForm::kMulSub && n == 4) return kMulSub;
  if (c.form == FusedForm::kAddThree && n == 3) return kAddThree;
  if (n == 1 && c.count == 2 && is_op(c, 0, FusedOp::kSigmoid) && c.a[0] == 0 && is_op(c, 1, FusedOp::kMul) &&
      reads(c, 1, 0, 1))
    return kSilu;
  if (n == 2 && c.count == 3 && is_op(c, 0, FusedOp::kSigmoid) && c.a[0] < 2 && is_op(c, 1, FusedOp::kMul) &&
      reads(c, 1, c.a[0], 2) && is_op(c, 2, FusedOp::kAdd) && reads(c, 2, 3, 1 - c.a[0])) {
    c.slot[0] = c.a[0];
    c.slot[1] = int8_t(1 - c.a[0]);
    return kResidualSilu;
  }
  if (match_gated(c, n)) return c.count == 4 ? kResidualGated : kGated;
  if (match_bias_gelu_erf(c, n)) return kBiasGeluErf;
  return kInterpreted;
}

// Moves input slot[i] of the launch (its address and strides) to position i, for the n
// inputs a compiled form reads; the slots become the identity.
inline void order_inputs_by_slot(MapLaunch* l, int n) {
  void* data[kMaxMapOperands];
  int64_t strides[kMaxMapOperands][kMaxDims];
  for (int i = 0; i < n; ++i) {
    data[i] = l->data[l->params.fused.slot[i] + 1];
    for (int d = 0; d < kMaxDims; ++d) strides[i][d] = l->ix.strides[l->params.fused.slot[i] + 1][d];
  }
  for (int i = 0; i < n; ++i) {
    l->data[i + 1] = data[i];
    for (int d = 0; d < kMaxDims; ++d) l->ix.strides[i + 1][d] = strides[i][d];
    l->params.fused.slot[i] = int8_t(i);
  }
}

}  // namespace strider::cuda::fused_forms
