// The storage-only types' conversions (base/small_types.h) at the edges ONNX's and PyTorch's
// conversions define: ties to even at the top (e4m3fn's 464 is 448, 465 overflows), the
// fnuz formats' NaN at 0x80 and no -0, e5m2's infinity, float4's NaN as 0x8, wrapping
// 4- and 2-bit integers.
#include "base/small_types.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace strider {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

uint8_t to(double v, DType d, bool saturate = true) { return small_type_from_double(v, d, saturate); }

TEST(SmallTypes, Float8E4M3FnRoundsTiesToEvenAndOverflowsPastTheTop) {
  const DType d = DType::kF8E4M3FN;
  EXPECT_EQ(to(1.0, d), 0x38);
  EXPECT_EQ(to(448, d), 0x7E);
  EXPECT_EQ(to(464, d, false), 0x7E);  // a tie with 480, which does not exist: to the even 448
  EXPECT_EQ(to(465, d, false), 0x7F);  // NaN
  EXPECT_EQ(to(465, d, true), 0x7E);
  EXPECT_EQ(to(-INFINITY, d, true), 0xFE);
  EXPECT_EQ(to(-INFINITY, d, false), 0xFF);
  EXPECT_EQ(to(kNaN, d), 0x7F);
  EXPECT_EQ(to(std::ldexp(1.0, -9), d), 0x01);      // the smallest subnormal
  EXPECT_EQ(to(std::ldexp(1.0, -10), d), 0x00);     // half of it ties to zero
  EXPECT_EQ(to(3 * std::ldexp(1.0, -10), d), 0x02);  // 1.5 quanta tie to 2
  EXPECT_EQ(to(-0.0, d), 0x80);
  EXPECT_TRUE(std::isnan(small_type_to_double(0xFF, d)));
  EXPECT_EQ(small_type_to_double(0x7E, d), 448);
}

TEST(SmallTypes, FnuzFormatsHaveNoNegativeZeroAndNaNAt0x80) {
  EXPECT_EQ(to(1.0, DType::kF8E4M3FNUZ), 0x40);
  EXPECT_EQ(to(240, DType::kF8E4M3FNUZ), 0x7F);
  EXPECT_EQ(to(248, DType::kF8E4M3FNUZ, false), 0x80);  // ties to 256: past the top
  EXPECT_EQ(to(248, DType::kF8E4M3FNUZ, true), 0x7F);
  EXPECT_EQ(to(-0.0, DType::kF8E4M3FNUZ), 0x00);
  EXPECT_EQ(to(-1e-9, DType::kF8E4M3FNUZ), 0x00);
  EXPECT_EQ(to(1.0, DType::kF8E5M2FNUZ), 0x40);
  EXPECT_EQ(to(1e6, DType::kF8E5M2FNUZ, false), 0x80);
  EXPECT_EQ(to(-1e6, DType::kF8E5M2FNUZ, true), 0xFF);
  EXPECT_TRUE(std::isnan(small_type_to_double(0x80, DType::kF8E5M2FNUZ)));
}

TEST(SmallTypes, Float8E5M2HasInfinity) {
  const DType d = DType::kF8E5M2;
  EXPECT_EQ(to(1.0, d), 0x3C);
  EXPECT_EQ(to(57344, d), 0x7B);
  EXPECT_EQ(to(61440, d, false), 0x7C);  // ties to 65536: infinity
  EXPECT_EQ(to(61440, d, true), 0x7B);
  EXPECT_EQ(to(INFINITY, d, false), 0x7C);
  EXPECT_EQ(small_type_to_double(0xFC, d), -INFINITY);
  EXPECT_TRUE(std::isnan(small_type_to_double(0x7F, d)));
}

TEST(SmallTypes, EveryFloat8ByteRoundTrips) {
  for (DType d : {DType::kF8E4M3FN, DType::kF8E4M3FNUZ, DType::kF8E5M2, DType::kF8E5M2FNUZ})
    for (int b = 0; b < 256; ++b) {
      const double v = small_type_to_double(uint8_t(b), d);
      if (std::isnan(v)) continue;
      EXPECT_EQ(to(v, d, false), b) << dtype_name(d) << " byte " << b << " = " << v;
    }
  for (int b = 0; b < 16; ++b)
    EXPECT_EQ(to(small_type_to_double(uint8_t(b), DType::kF4E2M1), DType::kF4E2M1), b == 8 ? 8 : b) << b;
}

TEST(SmallTypes, Float4SaturatesAndTiesToEven) {
  const DType d = DType::kF4E2M1;
  EXPECT_EQ(to(0.25, d), 0x0);
  EXPECT_EQ(to(0.75, d), 0x2);  // between 0.5 (odd) and 1.0 (even)
  EXPECT_EQ(to(-3.5, d), 0xE);  // -4
  EXPECT_EQ(to(-8, d, false), 0xF);
  EXPECT_EQ(to(kNaN, d), 0x8);
  EXPECT_EQ(small_type_to_double(0x7, d), 6);
}

TEST(SmallTypes, SubByteIntegersWrapAndSignExtend) {
  EXPECT_EQ(int8_t(to(9, DType::kI4)), -7);
  EXPECT_EQ(int8_t(to(-9, DType::kI4)), 7);
  EXPECT_EQ(int8_t(to(-8.7, DType::kI4)), -8);  // truncated toward zero first
  EXPECT_EQ(to(-1, DType::kU2), 3);
  EXPECT_EQ(to(17, DType::kU4), 1);
  EXPECT_EQ(small_type_to_double(to(-2, DType::kI2), DType::kI2), -2);
  EXPECT_EQ(to(kNaN, DType::kU4), 0);
}

}  // namespace
}  // namespace strider
