// f32 exp, sigmoid, tanh and erf over rows, in code the compiler vectorizes (the C library's
// expf and tanhf are scalar calls: in a gated chain they were 60% of the CPU's time). Used
// by the CPU's fused elementwise rows for those ops; the meaning is the elementwise table's
// (ops/elementwise_math.h), only the arithmetic differs, within the f32 tolerance every
// kernel is held to.
//
// exp: Cephes' expf: x = n ln2 + r with |r| <= ln2/2, a degree-6 polynomial for e^r, and
// 2^n put into the exponent bits; n is rounded with the 1.5 * 2^23 trick (no rounding
// instruction needed). Beyond the range: +inf above 88.72, 0 below -87.33 (where e^x is
// denormal: flushed to zero), NaN stays NaN. Relative error under 2 ulp on normal results
// for exp and tanh, 3 for sigmoid (tests/cpu/vector_math_tests.cc sweeps them against double).
// tanh: Cephes' odd polynomial below |x| 0.625, else 1 - 2 / (e^2|x| + 1), sign restored.
// sigmoid: 1 / (1 + e^-x). erf: fitted polynomials (vector_math.cc), under 3 ulp.
//
// Each row function is compiled three times (AVX-512, AVX2 with FMA, the x86-64
// baseline); the widest the CPU has runs.
#pragma once

#include <cstdint>

namespace strider::cpu::vector_math {

void exp_row(const float* x, float* out, int64_t n);
void sigmoid_row(const float* x, float* out, int64_t n);
void tanh_row(const float* x, float* out, int64_t n);
void erf_row(const float* x, float* out, int64_t n);  // GELU's
// tanh(a[i]) * sigmoid(b[i]): a gated activation unit (WaveNet, the gated chains) in one
// pass, one division a lane instead of two (vector_math.cc says how); under 4 ulp.
void gated_tanh_row(const float* a, const float* b, float* out, int64_t n);
// x[i] * sigmoid(x[i]): SiLU in one pass, the same floats as sigmoid_row then a multiply.
void silu_row(const float* x, float* out, int64_t n);

// The builds of the rows above, by instruction set: the rows run the widest the CPU has
// (cpu_has); public so their tests run every build this CPU can.
enum class VectorIsa { kBaseline, kAvx2Fma, kAvx512 };  // SSE2 (x86-64), AVX2 + FMA, x86-64-v4
bool cpu_has(VectorIsa isa);
using RowFunction = void (*)(const float* x, float* out, int64_t n);
using BinaryRowFunction = void (*)(const float* a, const float* b, float* out, int64_t n);
struct RowFunctions {
  RowFunction exp, sigmoid, tanh, erf;
  BinaryRowFunction gated_tanh;
  RowFunction silu;
};
RowFunctions row_functions(VectorIsa isa);

}  // namespace strider::cpu::vector_math
