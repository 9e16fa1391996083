#include <gtest/gtest.h>

#include <cmath>

#include "test_util.h"

namespace strider {
namespace {

using namespace strider::testing;

TEST(ReferenceElementwise, AddBroadcastsLikeNumpy) {
  Tensor a = random_f32({2, 3}, 1), b = random_f32({3}, 2);
  RefTensor c = run_one("Add", {a, b});
  EXPECT_EQ(c.shape, (Shape{2, 3}));
  std::vector<double> expected;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      expected.push_back(double(a.data<float>()[i * 3 + j]) + double(b.data<float>()[j]));
  expect_near_all(values_of(c), expected);
}

TEST(ReferenceElementwise, MulAndSubBroadcastBothWays) {
  Tensor a = random_f32({2, 1}, 3), b = random_f32({1, 3}, 4);
  RefTensor c = run_one("Sub", {a, b});
  ASSERT_EQ(c.shape, (Shape{2, 3}));
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      EXPECT_DOUBLE_EQ(c.floats[size_t(i * 3 + j)],
                       double(a.data<float>()[i]) - double(b.data<float>()[j]));
  auto bad = run_op("Mul", {random_f32({2, 3}, 5), random_f32({4}, 6)});
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("node 'the_node' (Mul)"), std::string::npos)
      << bad.status().to_string();
}

TEST(ReferenceElementwise, IntegerDivTruncatesTowardZeroAndRejectsZero) {
  RefTensor q = run_one("Div", {i64({4}, {7, -7, 7, -7}), i64({4}, {2, 2, -2, -2})});
  EXPECT_EQ(q.ints, (std::vector<int64_t>{3, -3, -3, 3}));
  auto zero = run_op("Div", {i32({2}, {1, 2}), i32({2}, {1, 0})});
  ASSERT_FALSE(zero.is_ok());
  EXPECT_EQ(zero.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(zero.status().message().find("the_node"), std::string::npos);
}

TEST(ReferenceElementwise, IntegerArithmeticWrapsToItsWidth) {
  EXPECT_EQ(run_one("Sub", {u8({2}, {3, 200}), u8({2}, {5, 100})}).ints,
            (std::vector<int64_t>{254, 100}));
  EXPECT_EQ(run_one("Add", {i32({1}, {2147483647}), i32({1}, {1})}).ints,
            (std::vector<int64_t>{-2147483648LL}));
  // i64 stays exact beyond 2^53 (a double would round).
  int64_t big = (int64_t(1) << 60) + 1;
  EXPECT_EQ(run_one("Mul", {i64({1}, {big}), i64({1}, {3})}).ints[0], 3 * big);
}

TEST(ReferenceElementwise, PowMixesBaseAndExponentTypes) {
  EXPECT_EQ(run_one("Pow", {i64({3}, {2, 3, -2}), i64({3}, {10, 3, 3})}).ints,
            (std::vector<int64_t>{1024, 27, -8}));
  EXPECT_EQ(run_one("Pow", {i32({2}, {9, 2}), f32({2}, {0.5f, 3.0f})}).ints,
            (std::vector<int64_t>{3, 8}));
  RefTensor f = run_one("Pow", {f32({2}, {2.0f, 4.0f}), i64({2}, {3, -1})});
  EXPECT_EQ(f.dtype, DType::kF32);
  EXPECT_EQ(f.floats, (std::vector<double>{8.0, 0.25}));
}

TEST(ReferenceElementwise, ClipAttributesBeforeOpset11InputsAfter) {
  Tensor x = f32({5}, {-3.0f, -0.5f, 0.25f, 1.5f, 4.0f});
  AttributeMap bounds;
  bounds.set_float("min", -1.0f);
  bounds.set_float("max", 1.0f);
  EXPECT_EQ(run_one("Clip", {x}, bounds, 10).floats, (std::vector<double>{-1, -0.5, 0.25, 1, 1}));
  EXPECT_EQ(run_one("Clip", {x, f32({}, {0.0f}), std::nullopt}, {}, 13).floats,
            (std::vector<double>{0, 0, 0.25, 1.5, 4}));
  // min > max: every element becomes max.
  EXPECT_EQ(run_one("Clip", {x, f32({}, {2.0f}), f32({}, {1.0f})}, {}, 13).floats,
            (std::vector<double>{1, 1, 1, 1, 1}));
  EXPECT_EQ(run_one("Clip", {i64({3}, {-5, 3, 9}), i64({}, {0}), i64({}, {6})}, {}, 13).ints,
            (std::vector<int64_t>{0, 3, 6}));
}

TEST(ReferenceElementwise, ActivationsAtKnownPoints) {
  Tensor x = f32({5}, {-4.0f, -1.0f, 0.0f, 1.0f, 4.0f});
  EXPECT_EQ(run_one("Relu", {x}).floats, (std::vector<double>{0, 0, 0, 1, 4}));
  expect_near_all(values_of(run_one("LeakyRelu", {x})), {-0.04, -0.01, 0, 1, 4}, 1e-7);
  expect_near_all(values_of(run_one("HardSigmoid", {x})), {0, 0.3, 0.5, 0.7, 1}, 1e-7);
  expect_near_all(values_of(run_one("HardSwish", {x})), {0, -1.0 / 3, 0, 2.0 / 3, 4});
  std::vector<double> sigmoid;
  for (double v : {-4.0, -1.0, 0.0, 1.0, 4.0}) sigmoid.push_back(1 / (1 + std::exp(-v)));
  expect_near_all(values_of(run_one("Sigmoid", {x})), sigmoid);
  expect_near_all(values_of(run_one("Erf", {f32({1}, {0.5f})})), {0.5204998778130465});
  EXPECT_EQ(run_one("Abs", {i32({2}, {-3, 4})}).ints, (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(run_one("Neg", {f32({2}, {-3.0f, 4.0f})}).floats, (std::vector<double>{3, -4}));
}

TEST(ReferenceElementwise, FloatOnlyOpsRejectIntegers) {
  auto r = run_op("Sigmoid", {i64({1}, {1})});
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidModel);
}

TEST(ReferenceElementwise, WhereAndComparisonsBroadcastToBool) {
  RefTensor w = run_one("Where", {boolean({2, 1}, {1, 0}), f32({3}, {1, 2, 3}), f32({1}, {-1})});
  EXPECT_EQ(w.shape, (Shape{2, 3}));
  EXPECT_EQ(w.floats, (std::vector<double>{1, 2, 3, -1, -1, -1}));
  Tensor a = f32({3}, {1, 2, 3}), b = f32({3}, {2, 2, 2});
  RefTensor less = run_one("Less", {a, b});
  EXPECT_EQ(less.dtype, DType::kBool);
  EXPECT_EQ(less.ints, (std::vector<int64_t>{1, 0, 0}));
  EXPECT_EQ(run_one("Greater", {a, b}).ints, (std::vector<int64_t>{0, 0, 1}));
  EXPECT_EQ(run_one("Equal", {i64({3}, {1, 2, 3}), i64({1}, {2})}).ints,
            (std::vector<int64_t>{0, 1, 0}));
}

TEST(ReferenceCast, FloatToIntTruncatesAndToBoolIsNonZero) {
  AttributeMap to_i32 = attrs({{"to", 6}});
  EXPECT_EQ(run_one("Cast", {f32({4}, {-2.7f, 2.7f, -0.5f, 100.9f})}, to_i32).ints,
            (std::vector<int64_t>{-2, 2, 0, 100}));
  EXPECT_EQ(run_one("Cast", {f32({3}, {0.0f, -0.1f, NAN})}, attrs({{"to", 9}})).ints,
            (std::vector<int64_t>{0, 1, 1}));
  EXPECT_EQ(run_one("Cast", {i64({3}, {256, 257, -1})}, attrs({{"to", 2}})).ints,
            (std::vector<int64_t>{0, 1, 255}));
  EXPECT_EQ(run_one("Cast", {boolean({2}, {1, 0})}, attrs({{"to", 1}})).floats,
            (std::vector<double>{1, 0}));
  auto unsupported_type = run_op("Cast", {f32({1}, {1})}, attrs({{"to", 8}}));  // STRING
  ASSERT_FALSE(unsupported_type.is_ok());
  EXPECT_EQ(unsupported_type.status().code(), StatusCode::kUnsupported);
}

TEST(ReferenceCast, FloatTargetsRoundOnceToNearestEven) {
  // 1 + 2^-11 + 2^-40 is just above the f16 halfway point between 1 and 1 + 2^-10: it must
  // round up. Rounding to f32 first would land on the halfway point and round to even (1).
  double tricky = 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40);
  RefTensor h = run_one("Cast", {f64({2}, {tricky, 1.0 / 3})}, attrs({{"to", 10}}));
  EXPECT_EQ(h.dtype, DType::kF16);
  EXPECT_EQ(h.floats[0], 1.0 + std::ldexp(1.0, -10));
  EXPECT_EQ(h.floats[1], 0.333251953125);
  RefTensor f = run_one("Cast", {f64({1}, {0.1})}, attrs({{"to", 1}}));
  EXPECT_EQ(f.floats[0], double(0.1f));
  RefTensor bf =
      run_one("Cast", {f32({1}, {1.00390625f})}, attrs({{"to", 16}}));  // halfway: to even
  EXPECT_EQ(bf.floats[0], 1.0);
}

}  // namespace
}  // namespace strider
