// ops/exact_division.h: the division by a reciprocal and Markstein's correction gives the
// bits of s / d.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "ops/exact_division.h"

namespace strider {
namespace {

uint32_t bits_of(float x) {
  uint32_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

// Seeded random quotients over the whole exponent range (subnormal and overflowing ones
// included, where it divides), the divisors the kernels meet (sqrt 2 for GELU, sqrt of head
// sizes) and random ones over the range it takes; every result bit-identical to s / d.
TEST(ExactDivision, MatchesTheDivisionBitForBit) {
  std::mt19937 random(29);
  std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
  std::uniform_int_distribution<int> exponent(-149, 127), divisor_exponent(-24, 23);
  std::vector<float> divisors = {std::sqrt(2.0f), std::sqrt(32.0f), std::sqrt(80.0f), 3.0f, -7.0f, 5.65625f, 0x1p-24f, 0x1p24f};
  for (int k = 0; k < 200; ++k) divisors.push_back((k % 2 ? -1.0f : 1.0f) * std::ldexp(mantissa(random), divisor_exponent(random)));
  std::vector<float> specials = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1e-45f, 3.4e38f, -0x1p-100f, 0x1p100f};
  int64_t checked = 0;
  for (float d : divisors) {
    ASSERT_TRUE(divisor_has_reciprocal(d)) << d;
    const float reciprocal = 1.0f / d;
    std::vector<float> scores = specials;
    for (int k = 0; k < 20000; ++k) scores.push_back((k % 2 ? -1.0f : 1.0f) * std::ldexp(mantissa(random), exponent(random)));
    for (float s : scores) {
      const float expected = s / d, got = divide_by_reciprocal(s, d, reciprocal);
      if (std::isnan(expected)) EXPECT_TRUE(std::isnan(got)) << s << " / " << d;
      else ASSERT_EQ(bits_of(expected), bits_of(got)) << s << " / " << d;
      ++checked;
    }
  }
  EXPECT_GT(checked, 4000000);
  for (float d : {0x1p-25f, 0x1p25f, 0.0f, INFINITY, NAN, 1e-40f}) EXPECT_FALSE(divisor_has_reciprocal(d)) << d;
}

}  // namespace
}  // namespace strider
