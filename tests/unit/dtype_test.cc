#include "strider/dtype.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "base/float16.h"

namespace strider {
namespace {

TEST(DType, NamesRoundTripAndSizes) {
  for (DType d : kAllDTypes) EXPECT_EQ(parse_dtype(dtype_name(d)), d);
  EXPECT_FALSE(parse_dtype("f8").has_value());
  EXPECT_EQ(dtype_size(DType::kBF16), 2);
  EXPECT_EQ(dtype_size(DType::kBool), 1);
  EXPECT_EQ(dtype_size(DType::kI64), 8);
}

TEST(BF16, RoundsToNearestEven) {
  EXPECT_EQ(bf16::from_float(1.0f).to_float(), 1.0f);
  // 1 + 2^-8 is exactly halfway between 1 and 1 + 2^-7: ties go to the even mantissa (1).
  EXPECT_EQ(bf16::from_float(1.0f + 1.0f / 256).to_float(), 1.0f);
  // 1 + 3 * 2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6: ties go to 1 + 2^-6.
  EXPECT_EQ(bf16::from_float(1.0f + 3.0f / 256).to_float(), 1.0f + 1.0f / 64);
  EXPECT_TRUE(std::isnan(bf16::from_float(std::numeric_limits<float>::quiet_NaN()).to_float()));
  EXPECT_TRUE(std::isinf(bf16::from_float(std::numeric_limits<float>::infinity()).to_float()));
}

TEST(F16, MatchesIeeeHalfOnSeededRandomValues) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-70000.0f, 70000.0f);
  for (int i = 0; i < 10000; ++i) {
    float x = dist(rng) * (i % 3 == 0 ? 1e-6f : 1.0f);
    float y = f16::from_float(x).to_float();
    if (std::fabs(x) >= 65520.0f) {
      EXPECT_TRUE(std::isinf(y)) << x;
    } else if (std::fabs(x) >= 6.103515625e-05f) {
      EXPECT_LE(std::fabs(y - x), std::fabs(x) * (1.0f / 2048)) << x;  // half an ulp
    } else {
      EXPECT_LE(std::fabs(y - x), 2.98023224e-08f) << x;  // half the subnormal step 2^-24
    }
  }
  EXPECT_EQ(f16::from_float(65504.0f).bits, 0x7bffu);
  EXPECT_EQ(f16::from_float(5.9604645e-08f).bits, 0x0001u);
  EXPECT_EQ(f16::from_bits(0x3c00).to_float(), 1.0f);
}

}  // namespace
}  // namespace strider
