// The CPU's vectorized exp, sigmoid and tanh rows (src/hal/cpu/vector_math.h) against the
// C library's double precision, over a dense sweep and the special values: relative error
// in ulps of f32 where the true value is a normal float, the right ends past the range.
#include <gtest/gtest.h>

#include <cstring>

#include <algorithm>
#include <array>

#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <vector>

#include "hal/cpu/vector_math.h"

namespace strider::cpu {
namespace {

using RowFn = void (*)(const float*, float*, int64_t);

// Inputs: every 1/1024 step over [-110, 110], seeded random ones, and the special values.
std::vector<float> sweep() {
  std::vector<float> x;
  for (int i = -110 * 1024; i <= 110 * 1024; ++i) x.push_back(float(i) / 1024.0f);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> wide(-20.0f, 20.0f);
  for (int i = 0; i < 100000; ++i) x.push_back(wide(rng));
  for (float v : {0.0f, -0.0f, 1e-30f, -1e-30f, 1e-8f, 0.625f, -0.625f, 0.62499994f, 88.72283f, 88.7229f, -87.33654f,
                  -87.3366f, 9.0f, 9.02f, 10.0f, 10.5f, 1.0f, -1.0f, 0.99999994f, 1.0000001f, 3.92f, 4.0f, -4.0f})
    x.push_back(v);
  return x;
}

// Worst error in f32 ulps (of the true value) over the inputs whose true value is normal.
double worst_ulps(RowFn row, double (*truth)(double), const std::vector<float>& x) {
  std::vector<float> out(x.size());
  row(x.data(), out.data(), int64_t(x.size()));
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double want = truth(double(x[i]));
    if (!(std::fabs(want) >= double(std::numeric_limits<float>::min())) || std::fabs(want) > 3.4e38) continue;
    const double ulp = std::ldexp(1.0, std::ilogb(want) - 23);
    worst = std::max(worst, std::fabs(double(out[i]) - want) / ulp);
  }
  return worst;
}

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// Every build this CPU can run (AVX-512, AVX2 + FMA, the baseline), and the rows it runs.
TEST(VectorMath, ExpTanhWithinTwoUlpsSigmoidErfThree) {
  using vector_math::VectorIsa;
  const std::vector<float> x = sweep();
  std::vector<std::array<RowFn, 4>> rows{
      {vector_math::exp_row, vector_math::sigmoid_row, vector_math::tanh_row, vector_math::erf_row}};
  for (VectorIsa isa : {VectorIsa::kAvx512, VectorIsa::kAvx2Fma, VectorIsa::kBaseline}) {
    if (!vector_math::cpu_has(isa)) {
      std::printf("this CPU has no %s: that build is not run here\n", isa == VectorIsa::kAvx512 ? "AVX-512" : "AVX2");
      continue;
    }
    const vector_math::RowFunctions f = vector_math::row_functions(isa);
    rows.push_back({f.exp, f.sigmoid, f.tanh, f.erf});
  }
  for (const auto& row : rows) {
    const double exp_ulps = worst_ulps(row[0], [](double v) { return std::exp(v); }, x);
    const double sigmoid_ulps = worst_ulps(row[1], sigmoid, x);
    const double tanh_ulps = worst_ulps(row[2], [](double v) { return std::tanh(v); }, x);
    EXPECT_LE(exp_ulps, 2.0);
    EXPECT_LE(sigmoid_ulps, 3.0);  // exp's error, then a division
    const double erf_ulps = worst_ulps(row[3], [](double v) { return std::erf(v); }, x);
    EXPECT_LE(tanh_ulps, 2.0);
    EXPECT_LE(erf_ulps, 3.0);  // 1 - e^-x^2 Q near |x| = 1 rounds twice
    std::printf("worst ulps: exp %.2f sigmoid %.2f tanh %.2f erf %.2f\n", exp_ulps, sigmoid_ulps, tanh_ulps, erf_ulps);
  }
}

// SiLU's one-pass row gives exactly the floats of the sigmoid row then a multiply (what the
// fused kernel's two instructions gave before it ran them as one), on every build, at the
// ends of the range and for NaN and the infinities too.
TEST(VectorMath, SiluRowIsSigmoidThenMultiplyBitForBit) {
  using vector_math::VectorIsa;
  std::vector<float> x = sweep();
  for (float v : {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                  std::numeric_limits<float>::quiet_NaN(), 88.0f, -88.0f, -1000.0f, 0.0f, -0.0f})
    x.push_back(v);
  for (VectorIsa isa : {VectorIsa::kAvx512, VectorIsa::kAvx2Fma, VectorIsa::kBaseline}) {
    if (!vector_math::cpu_has(isa)) continue;
    const vector_math::RowFunctions f = vector_math::row_functions(isa);
    std::vector<float> s(x.size()), silu(x.size());
    f.sigmoid(x.data(), s.data(), int64_t(x.size()));
    f.silu(x.data(), silu.data(), int64_t(x.size()));
    for (size_t i = 0; i < x.size(); ++i) {
      const float expected = x[i] * s[i];
      uint32_t a, b;
      std::memcpy(&a, &expected, 4);
      std::memcpy(&b, &silu[i], 4);
      ASSERT_TRUE(a == b || (expected != expected && silu[i] != silu[i])) << "x " << x[i] << ": " << silu[i] << " vs " << expected;
    }
  }
}

TEST(VectorMath, EndsOfTheRangeAndNaN) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> x = {inf, -inf, nan, 89.0f, 1000.0f, -88.0f, -1000.0f, 0.0f};
  std::vector<float> e(x.size()), s(x.size()), t(x.size());
  vector_math::exp_row(x.data(), e.data(), int64_t(x.size()));
  vector_math::sigmoid_row(x.data(), s.data(), int64_t(x.size()));
  vector_math::tanh_row(x.data(), t.data(), int64_t(x.size()));
  EXPECT_EQ(e[0], inf);
  EXPECT_EQ(e[1], 0.0f);
  EXPECT_TRUE(std::isnan(e[2]) && std::isnan(s[2]) && std::isnan(t[2]));
  EXPECT_EQ(e[3], inf);
  EXPECT_EQ(e[4], inf);
  EXPECT_GE(e[5], 0.0f);
  EXPECT_LE(e[5], 1e-38f);
  EXPECT_EQ(e[6], 0.0f);
  EXPECT_EQ(e[7], 1.0f);
  EXPECT_EQ(s[0], 1.0f);
  EXPECT_EQ(s[1], 0.0f);
  EXPECT_EQ(s[7], 0.5f);
  EXPECT_EQ(t[0], 1.0f);
  EXPECT_EQ(t[1], -1.0f);
  EXPECT_EQ(t[4], 1.0f);
  EXPECT_EQ(t[6], -1.0f);
  EXPECT_EQ(t[7], 0.0f);
  EXPECT_TRUE(std::signbit(t[7]) == false);
  std::vector<float> r(x.size());
  vector_math::erf_row(x.data(), r.data(), int64_t(x.size()));
  EXPECT_EQ(r[0], 1.0f);
  EXPECT_EQ(r[1], -1.0f);
  EXPECT_TRUE(std::isnan(r[2]));
  EXPECT_EQ(r[6], -1.0f);
  EXPECT_EQ(r[7], 0.0f);
}

// tanh(a) * sigmoid(b) in one pass: every build within 4 ulp of double over a on the sweep
// against b on a shuffled copy of it (tanh's small, cancelling range and sigmoid's ends
// meet); the ends: NaN in either gives NaN, infinities give the limits.
TEST(VectorMath, GatedTanhWithinFourUlps) {
  using vector_math::VectorIsa;
  const std::vector<float> a = sweep();
  std::vector<float> b = a;
  std::shuffle(b.begin(), b.end(), std::mt19937(11));
  std::vector<vector_math::BinaryRowFunction> rows{vector_math::gated_tanh_row};
  for (VectorIsa isa : {VectorIsa::kAvx512, VectorIsa::kAvx2Fma, VectorIsa::kBaseline})
    if (vector_math::cpu_has(isa)) rows.push_back(vector_math::row_functions(isa).gated_tanh);
  for (auto row : rows) {
    std::vector<float> out(a.size());
    row(a.data(), b.data(), out.data(), int64_t(a.size()));
    double worst = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      const double want = std::tanh(double(a[i])) * sigmoid(double(b[i]));
      if (!(std::fabs(want) >= double(std::numeric_limits<float>::min()))) continue;
      worst = std::max(worst, std::fabs(double(out[i]) - want) / std::ldexp(1.0, std::ilogb(want) - 23));
    }
    EXPECT_LE(worst, 4.0);
    std::printf("gated tanh worst ulps %.2f\n", worst);
  }
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> x = {nan, 1.0f, inf, -inf, 0.0f, 2.0f, 3.0f}, y = {1.0f, nan, inf, inf, 5.0f, -inf, -200.0f};
  std::vector<float> g(x.size());
  vector_math::gated_tanh_row(x.data(), y.data(), g.data(), int64_t(x.size()));
  EXPECT_TRUE(std::isnan(g[0]) && std::isnan(g[1]));
  EXPECT_EQ(g[2], 1.0f);
  EXPECT_EQ(g[3], -1.0f);
  EXPECT_EQ(g[4], 0.0f);
  EXPECT_LE(std::fabs(g[5]), 1e-37f);
  EXPECT_LE(std::fabs(g[6]), 1e-37f);
}

}  // namespace
}  // namespace strider::cpu
