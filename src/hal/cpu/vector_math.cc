#include "hal/cpu/vector_math.h"

#include <bit>
#include <cmath>
#include <limits>

// Compiled with -fno-trapping-math (src/hal/cpu/CMakeLists.txt): the compiler may then
// evaluate both sides of a select, which is what lets these loops vectorize. Nothing here
// reads floating-point exception flags.

namespace strider::cpu::vector_math {
namespace {

// e^r - 1 for x = n ln2 + r, |r| <= ln2 / 2, with n returned in `exponent` (Cephes' expf
// reduction and polynomial; x within the normal range).
[[gnu::always_inline]] inline float expm1_reduced(float x, int32_t* exponent) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  float shifted = x * kLog2e + kRound;
  float n = shifted - kRound;
  *exponent = std::bit_cast<int32_t>(shifted) - std::bit_cast<int32_t>(kRound);
  float r = x - n * kLn2Hi - n * kLn2Lo;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  return p * (r * r) + r;
}

// e^x for |x| within the normal range, NaN passing through; the callers handle the ends.
// kNarrow: x is known to lie within [-87.33, 87.33] (tanh's and sigmoid's arguments, which
// they clamp), so 2^n is one exponent field, not two halves: four fewer operations a lane.
template <bool kNarrow = false>
[[gnu::always_inline]] inline float exp_core(float x) {
  float clamped = x < -87.33654f ? -87.33654f : (x > 88.72283f ? 88.72283f : x);
  int32_t exponent;
  float e = expm1_reduced(clamped, &exponent) + 1.0f;
  // 2^n in two halves, so n = 128 (x near 88.72, e < 1) does not overflow the exponent.
  // (Unsigned shifts: a NaN's garbage exponent must not be a signed overflow; its result is
  // replaced by the NaN in exp_one.)
  if constexpr (kNarrow) return e * std::bit_cast<float>(uint32_t(exponent + 127) << 23);
  int32_t half = exponent >> 1;
  float scale_a = std::bit_cast<float>(uint32_t(half + 127) << 23);
  float scale_b = std::bit_cast<float>(uint32_t(exponent - half + 127) << 23);
  return e * scale_a * scale_b;
}

[[gnu::always_inline]] inline float exp_one(float x) {
  float e = exp_core(x);
  e = x > 88.72283f ? std::numeric_limits<float>::infinity() : e;
  e = x < -87.33654f ? 0.0f : e;
  return x != x ? x : e;
}

[[gnu::always_inline]] inline float tanh_one(float x) {
  float a = x < 0 ? -x : x;
  float z = x * x;
  float small = ((((-5.70498872745e-3f * z + 2.06390887954e-2f) * z - 5.37397155531e-2f) * z + 1.33314422036e-1f) * z -
                 3.33332819422e-1f) * z * x + x;
  float e = exp_core<true>(2.0f * (a > 10.0f ? 10.0f : a));  // tanh rounds to 1 in f32 beyond 9.02
  float large = 1.0f - 2.0f / (e + 1.0f);
  large = x < 0 ? -large : large;
  float t = a < 0.625f ? small : large;
  return x != x ? x : t;
}

// Below -87.33 the true value is under the smallest normal float: 0. Above 87.33, e^-x
// is below it and the sum rounds to 1 either way.
[[gnu::always_inline]] inline float sigmoid_one(float x) {
  const float clamped = x < -87.33654f ? -87.33654f : (x > 87.33654f ? 87.33654f : x);
  float s = 1.0f / (1.0f + exp_core<true>(-clamped));
  s = x < -87.33654f ? 0.0f : s;
  return x != x ? x : s;
}

// erf: below |x| 1, x * P(x^2); from 1 to 4, 1 - e^-x^2 * Q(1 / |x|), Q fitting
// erfc(x) e^x^2; beyond 4, +-1 (erf rounds to 1 in f32 from 3.92). P (degree 6) and Q
// (degree 8) are least-squares Chebyshev fits in double (relative error 3e-9 and 2.2e-7;
// Q's is scaled by erfc <= 0.16 in the result).
[[gnu::always_inline]] inline float silu_one(float x) { return x * sigmoid_one(x); }

[[gnu::always_inline]] inline float erf_one(float x) {
  float a = x < 0 ? -x : x;
  float t = x * x;
  float p = 7.843559423742717e-05f;
  p = p * t - 0.0008003826082942875f;
  p = p * t + 0.0051871468489979545f;
  p = p * t - 0.026852870053666995f;
  p = p * t + 0.11283550967510286f;
  p = p * t - 0.37612620789244483f;
  p = p * t + 1.1283791637725027f;
  float small = x * p;
  float b = a < 1.0f ? 1.0f : (a > 4.0f ? 4.0f : a);
  float u = 1.0f / b;
  float q = -0.009414410362149093f;
  q = q * u + 0.027860684335242865f;
  q = q * u + 0.026358155038495097f;
  q = q * u - 0.24637231959949896f;
  q = q * u + 0.5011680471660518f;
  q = q * u - 0.47394999577059527f;
  q = q * u + 0.0427322991313412f;
  q = q * u + 0.5589226074731546f;
  q = q * u + 0.00027845430822170947f;
  float large = 1.0f - exp_core(-b * b) * q;
  large = a >= 4.0f ? 1.0f : large;
  large = x < 0 ? -large : large;
  float e = a < 1.0f ? small : large;
  return x != x ? x : e;
}

// tanh(a) * sigmoid(b), the gate of WaveNet-style units, with one division instead of two
// and no second polynomial: tanh|a| = -m / (2 + m) with m = e^(-2|a|) - 1 computed as
// expm1 (2^n (e^r - 1) + (2^n - 1), exact where tanh is small), and sigmoid(b) = 1 / (1 + e^-b),
// so the product is sign(a) (-m) / ((2 + m)(1 + e^-b)). |a| is clamped at 9 (tanh rounds to
// 1 from 9.02) and b as sigmoid_one clamps it, so the denominator stays under 1.7e38. Below
// b = -87.33 the product is of the order of 1e-38, where sigmoid_one's is 0.
[[gnu::always_inline]] inline float gated_tanh_one(float a, float b) {
  const float magnitude = a < 0 ? -a : a;
  const float y = -2.0f * (magnitude > 9.0f ? 9.0f : magnitude);  // in [-18, 0]
  int32_t exponent;
  const float em1 = expm1_reduced(y, &exponent);  // e^r - 1
  const float scale = std::bit_cast<float>(uint32_t(exponent + 127) << 23);  // 2^n, n in [-26, 0]
  const float m = scale * em1 + (scale - 1.0f);                               // e^y - 1
  const float clamped_b = b < -87.33654f ? -87.33654f : (b > 87.33654f ? 87.33654f : b);
  const float eb = exp_core<true>(-clamped_b);
  const float gate = -m / ((2.0f + m) * (1.0f + eb));
  const float signed_gate = a < 0 ? -gate : gate;
  return a != a ? a : (b != b ? b : signed_gate);
}

// Each row loop for AVX-512 (16 lanes), AVX2 with FMA (8 lanes) and the x86-64 baseline
// (SSE2, 4 lanes); the widest the CPU has is chosen once. 512-bit vectors are asked for
// in each compiler's words: clang takes no prefer-vector-width in a target attribute (it
// ignored the whole attribute, so its builds compiled the AVX-512 rows for the baseline)
// and has min_vector_width instead.
#if defined(__clang__)
#define STRIDER_AVX512_ROW __attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,avx2,fma"), min_vector_width(512)))
#else
#define STRIDER_AVX512_ROW __attribute__((target("arch=x86-64-v4,prefer-vector-width=512")))
#endif
#define STRIDER_AVX2_ROW __attribute__((target("avx2,fma")))
#define STRIDER_ROW(name, one, suffix, attributes)                   \
  attributes void name##_##suffix(const float* x, float* out, int64_t n) { \
    for (int64_t i = 0; i < n; ++i) out[i] = one(x[i]);              \
  }
#define STRIDER_GATED_ROW(suffix, attributes)                                                   \
  attributes void gated_tanh_##suffix(const float* a, const float* b, float* out, int64_t n) { \
    for (int64_t i = 0; i < n; ++i) out[i] = gated_tanh_one(a[i], b[i]);                        \
  }
#define STRIDER_ROWS(suffix, attributes)                \
  STRIDER_GATED_ROW(suffix, attributes)                 \
  STRIDER_ROW(exp, exp_one, suffix, attributes)         \
  STRIDER_ROW(sigmoid, sigmoid_one, suffix, attributes) \
  STRIDER_ROW(tanh, tanh_one, suffix, attributes)       \
  STRIDER_ROW(erf, erf_one, suffix, attributes)         \
  STRIDER_ROW(silu, silu_one, suffix, attributes)
STRIDER_ROWS(avx512, STRIDER_AVX512_ROW)
STRIDER_ROWS(avx2, STRIDER_AVX2_ROW)
#undef STRIDER_ROWS
#undef STRIDER_ROW
#undef STRIDER_GATED_ROW
#undef STRIDER_AVX2_ROW
#undef STRIDER_AVX512_ROW

void exp_baseline(const float* x, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = exp_one(x[i]);
}
void sigmoid_baseline(const float* x, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = sigmoid_one(x[i]);
}
void tanh_baseline(const float* x, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = tanh_one(x[i]);
}
void erf_baseline(const float* x, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = erf_one(x[i]);
}
void silu_baseline(const float* x, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = silu_one(x[i]);
}
void gated_tanh_baseline(const float* a, const float* b, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = gated_tanh_one(a[i], b[i]);
}

const RowFunctions& chosen() {
  static const RowFunctions rows = row_functions(
      cpu_has(VectorIsa::kAvx512) ? VectorIsa::kAvx512 : cpu_has(VectorIsa::kAvx2Fma) ? VectorIsa::kAvx2Fma : VectorIsa::kBaseline);
  return rows;
}

}  // namespace

bool cpu_has(VectorIsa isa) {
  switch (isa) {
    case VectorIsa::kBaseline: return true;
    case VectorIsa::kAvx2Fma: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case VectorIsa::kAvx512:
      return cpu_has(VectorIsa::kAvx2Fma) && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
  }
  return false;
}

RowFunctions row_functions(VectorIsa isa) {
  switch (isa) {
    case VectorIsa::kAvx512: return {exp_avx512, sigmoid_avx512, tanh_avx512, erf_avx512, gated_tanh_avx512, silu_avx512};
    case VectorIsa::kAvx2Fma: return {exp_avx2, sigmoid_avx2, tanh_avx2, erf_avx2, gated_tanh_avx2, silu_avx2};
    case VectorIsa::kBaseline: break;
  }
  return {exp_baseline, sigmoid_baseline, tanh_baseline, erf_baseline, gated_tanh_baseline, silu_baseline};
}

void exp_row(const float* x, float* out, int64_t n) { chosen().exp(x, out, n); }
void sigmoid_row(const float* x, float* out, int64_t n) { chosen().sigmoid(x, out, n); }
void tanh_row(const float* x, float* out, int64_t n) { chosen().tanh(x, out, n); }
void erf_row(const float* x, float* out, int64_t n) { chosen().erf(x, out, n); }
void gated_tanh_row(const float* a, const float* b, float* out, int64_t n) { chosen().gated_tanh(a, b, out, n); }
void silu_row(const float* x, float* out, int64_t n) { chosen().silu(x, out, n); }

}  // namespace strider::cpu::vector_math
