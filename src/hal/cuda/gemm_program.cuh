// The fused program after a product (small_gemm.h's contract), as the small product and
// the f32 tensor-core product apply it to each output before its store. nvcc only; each
// including file gets its own copy (an anonymous namespace: no relocatable device code).
#pragma once

#include "hal/cuda/fused_forms.cuh"
#include "hal/cuda/small_gemm.h"

namespace strider::cuda {
namespace {

using namespace device;

// One instruction of a program the compiled forms do not cover: out of line, so the
// interpreter's switch is compiled once for this file (as in elementwise.cu).
__device__ __noinline__ float gemm_instruction(FusedOp op, float a, float b, float alpha, float beta) {
  return fused_math::apply(op, a, b, alpha, beta);
}

// The program on one output: registers from their views at (batch, row, col), the
// product in its register; a compiled form where the host matched one.
template <typename T>
__device__ float apply_gemm_program(const SmallGemmArgs& a, float product,
                                   int64_t (&batch_index)[kSmallGemmBatchDims], int64_t row, int64_t col) {
  float r[kMaxFusedInputs + kMaxFusedInstructions];
  for (int i = 0; i < a.registers; ++i) {
    if (i == a.product_register) {
      r[i] = product;
      continue;
    }
    const SmallGemmOperand& o = a.operands[i];
    int64_t at = row * o.row + col * o.col;
    for (int d = 0; d < a.batch_dims; ++d) at += batch_index[d] * o.batch[d];
    r[i] = load<T>(o.data, at);
  }
  const FusedCode& c = a.code;
  using namespace fused_forms;
  const auto x = [&](int i) { return r[c.slot[i]]; };
  const MapParams none;  // the forms take no parameters
  switch (Pattern(c.pattern)) {
    case kSilu: return Silu(none)(x(0));
    case kResidualSilu: return ResidualSilu(none)(x(0), x(1));
    case kGated: return Gated<false>(none)(x(0), x(1));
    case kResidualGated: return Gated<true>(none)(x(0), x(1), x(2));
    case kBiasGeluErf: return BiasGeluErf(none)(x(0), x(1), x(2), x(3), x(4));
    case kBiasGeluTanh: return BiasGeluTanh(none)(r[0], r[1], r[2], r[3], r[4], r[5]);
    case kSiluGate: return SiluGate(none)(x(0), x(1));
    case kMulAdd: return MulAdd(none)(x(0), x(1), x(2), x(3));
    case kMulSub: return MulSub(none)(x(0), x(1), x(2), x(3));
    default: break;
  }
  for (int j = 0; j < c.count; ++j)
    r[a.registers + j] = gemm_instruction(FusedOp(c.op[j]), r[c.a[j]], c.b[j] >= 0 ? r[c.b[j]] : 0.0f, c.alpha[j], c.beta[j]);
  return r[a.registers + c.count - 1];
}

}  // namespace
}  // namespace strider::cuda
