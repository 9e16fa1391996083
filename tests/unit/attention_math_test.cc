// The scalar math of FusedAttention's score steps (ops/attention_math.h).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "ops/attention_math.h"

namespace strider {
namespace {

uint32_t bits_of(float x) {
  uint32_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

// A Div by a power of two becomes the Mul by its reciprocal, and gives the same bits for
// every score: seeded random ones across the exponent range, subnormal quotients, infinities
// and NaN. Other divisors stay divisions.
TEST(AttentionMath, DivisionByAPowerOfTwoIsTheExactProduct) {
  std::mt19937 random(23);
  std::uniform_real_distribution<float> mantissa(-2.0f, 2.0f);
  std::uniform_int_distribution<int> exponent(-140, 120);
  for (float divisor : {8.0f, 2.0f, 0.25f, -16.0f, 1.0f}) {
    const ScoreStep step = division_as_product({ScoreStepKind::kDiv, divisor});
    ASSERT_EQ(step.kind, ScoreStepKind::kMul) << divisor;
    std::vector<float> scores = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1e-40f, -3e-39f, 3.4e38f};
    for (int k = 0; k < 2000; ++k) scores.push_back(std::ldexp(mantissa(random), exponent(random)));
    for (float s : scores) {
      const float divided = apply_score_step(ScoreStepKind::kDiv, divisor, s, 0);
      const float multiplied = apply_score_step(step.kind, step.value, s, 0);
      if (std::isnan(divided)) EXPECT_TRUE(std::isnan(multiplied)) << s << " / " << divisor;
      else EXPECT_EQ(bits_of(divided), bits_of(multiplied)) << s << " / " << divisor;
    }
  }
  for (float divisor : {std::sqrt(80.0f), 3.0f, 0.0f, INFINITY, NAN, 1e-39f, 0x1p-127f, 0x1p127f})
    EXPECT_EQ(division_as_product({ScoreStepKind::kDiv, divisor}).kind, ScoreStepKind::kDiv) << divisor;
  EXPECT_EQ(division_as_product({ScoreStepKind::kAdd, 8.0f}).kind, ScoreStepKind::kAdd);
}

}  // namespace
}  // namespace strider
