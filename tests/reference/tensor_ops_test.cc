#include <gtest/gtest.h>

#include <limits>

#include "test_util.h"

namespace strider {
namespace {

using namespace strider::testing;

Tensor iota_f32(Shape shape) {
  Tensor t(DType::kF32, shape);
  for (int64_t i = 0; i < t.num_elements(); ++i) t.data<float>()[i] = float(i) * 0.5f - 3.0f;
  return t;
}

TEST(ReferenceReshape, ZeroCopiesAndMinusOneInfers) {
  Tensor x = random_f32({2, 3, 4}, 7);
  RefTensor y = run_one("Reshape", {x, i64({3}, {0, -1, 2})});
  EXPECT_EQ(y.shape, (Shape{2, 6, 2}));
  EXPECT_EQ(values_of(y), doubles(x));
  AttributeMap allow_zero = attrs({{"allowzero", 1}});
  RefTensor empty = run_one("Reshape", {f32({0, 3}, {}), i64({2}, {3, 0})}, allow_zero, 14);
  EXPECT_EQ(empty.shape, (Shape{3, 0}));
}

TEST(ReferenceReshape, ImpossibleShapesAreErrorsNamingTheNode) {
  for (auto shape : {i64({2}, {5, -1}), i64({2}, {-1, -1}), i64({1}, {7}), i64({2}, {-2, 12})}) {
    auto r = run_op("Reshape", {random_f32({2, 3, 4}, 8), shape});
    ASSERT_FALSE(r.is_ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("node 'the_node' (Reshape)"), std::string::npos)
        << r.status().to_string();
  }
}

TEST(ReferenceTranspose, DefaultReversesAndPermMoves) {
  Tensor x = iota_f32({2, 3, 4});
  RefTensor rev = run_one("Transpose", {x});
  EXPECT_EQ(rev.shape, (Shape{4, 3, 2}));
  // rev[k][j][i] = x[i][j][k]
  EXPECT_EQ(rev.floats[size_t((3 * 3 + 1) * 2 + 1)], x.data<float>()[(1 * 3 + 1) * 4 + 3]);
  AttributeMap perm;
  perm.set_ints("perm", {1, 0, 2});
  RefTensor p = run_one("Transpose", {x}, perm);
  EXPECT_EQ(p.shape, (Shape{3, 2, 4}));
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k)
        EXPECT_EQ(p.floats[size_t((j * 2 + i) * 4 + k)], x.data<float>()[(i * 3 + j) * 4 + k]);
  perm.set_ints("perm", {0, 0, 1});
  EXPECT_FALSE(run_op("Transpose", {x}, perm).is_ok());
}

TEST(ReferenceSqueeze, AxesAttributeBeforeOpset13InputAfter) {
  Tensor x = random_f32({1, 3, 1, 2}, 9);
  AttributeMap axes;
  axes.set_ints("axes", {-2});
  EXPECT_EQ(run_one("Squeeze", {x}, axes, 11).shape, (Shape{1, 3, 2}));
  EXPECT_EQ(run_one("Squeeze", {x, i64({1}, {0})}, {}, 13).shape, (Shape{3, 1, 2}));
  EXPECT_EQ(run_one("Squeeze", {x}, {}, 13).shape, (Shape{3, 2}));
  EXPECT_FALSE(run_op("Squeeze", {x, i64({1}, {1})}, {}, 13).is_ok());
  axes.set_ints("axes", {0, 3});
  EXPECT_EQ(run_one("Unsqueeze", {random_f32({2, 3}, 10)}, axes, 11).shape, (Shape{1, 2, 3, 1}));
  EXPECT_EQ(run_one("Unsqueeze", {random_f32({2, 3}, 10), i64({2}, {-1, 1})}, {}, 13).shape,
            (Shape{2, 1, 3, 1}));
}

TEST(ReferenceFlatten, AxisSplitsTheShape) {
  Tensor x = random_f32({2, 3, 4}, 11);
  EXPECT_EQ(run_one("Flatten", {x}).shape, (Shape{2, 12}));
  EXPECT_EQ(run_one("Flatten", {x}, attrs({{"axis", 0}})).shape, (Shape{1, 24}));
  EXPECT_EQ(run_one("Flatten", {x}, attrs({{"axis", 3}})).shape, (Shape{24, 1}));
  EXPECT_EQ(run_one("Flatten", {x}, attrs({{"axis", -1}})).shape, (Shape{6, 4}));
}

TEST(ReferenceConcat, JoinsAlongTheAxisAndRejectsMismatches) {
  Tensor a = iota_f32({2, 1}), b = f32({2, 2}, {10, 11, 12, 13});
  RefTensor c = run_one("Concat", {a, b}, attrs({{"axis", -1}}));
  EXPECT_EQ(c.shape, (Shape{2, 3}));
  EXPECT_EQ(c.floats, (std::vector<double>{-3, 10, 11, -2.5, 12, 13}));
  auto bad = run_op("Concat", {a, f32({3, 2}, {1, 2, 3, 4, 5, 6})}, attrs({{"axis", 1}}));
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("the_node"), std::string::npos);
}

TEST(ReferenceSplit, EveryVersionsWayOfSizingTheParts) {
  Tensor x = iota_f32({7, 2});
  AttributeMap split;
  split.set_ints("split", {2, 5});
  auto v11 = run_op("Split", {x}, split, 11, 2);
  ASSERT_TRUE(v11.is_ok()) << v11.status().to_string();
  EXPECT_EQ((*v11)[0].shape, (Shape{2, 2}));
  EXPECT_EQ((*v11)[1].floats[0], -1.0);  // row 2
  auto v13 = run_op("Split", {x, i64({3}, {1, 1, 5})}, {}, 13, 3);
  ASSERT_TRUE(v13.is_ok());
  EXPECT_EQ((*v13)[2].shape, (Shape{5, 2}));
  auto v18 = run_op("Split", {x}, attrs({{"num_outputs", 3}}), 18, 3);  // ceil(7/3) = 3: 3, 3, 1
  ASSERT_TRUE(v18.is_ok()) << v18.status().to_string();
  EXPECT_EQ((*v18)[0].shape, (Shape{3, 2}));
  EXPECT_EQ((*v18)[2].shape, (Shape{1, 2}));
  EXPECT_EQ((*v18)[2].floats, (std::vector<double>{3, 3.5}));
  EXPECT_FALSE(run_op("Split", {x}, {}, 13, 2).is_ok());  // 7 does not split in two
  auto columns = run_op("Split", {x}, attrs({{"axis", 1}}), 13, 2);
  ASSERT_TRUE(columns.is_ok());
  EXPECT_EQ((*columns)[1].floats[1], -1.5);  // row 1, column 1
}

TEST(ReferenceSlice, NegativeStepsAndClampedEnds) {
  Tensor x = iota_f32({10});
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  RefTensor all_reversed =
      run_one("Slice", {x, i64({1}, {-1}), i64({1}, {kMin}), i64({1}, {0}), i64({1}, {-1})});
  EXPECT_EQ(all_reversed.shape, (Shape{10}));
  EXPECT_EQ(all_reversed.floats[0], 1.5);
  EXPECT_EQ(all_reversed.floats[9], -3.0);
  RefTensor stepped =
      run_one("Slice", {x, i64({1}, {1}), i64({1}, {kMax}), std::nullopt, i64({1}, {3})});
  EXPECT_EQ(values_of(stepped), (std::vector<double>{-2.5, -1.0, 0.5}));  // elements 1, 4, 7
  RefTensor back =
      run_one("Slice", {x, i64({1}, {8}), i64({1}, {2}), i64({1}, {0}), i64({1}, {-2})});
  EXPECT_EQ(values_of(back), (std::vector<double>{1.0, 0.0, -1.0}));  // elements 8, 6, 4
  RefTensor empty = run_one("Slice", {x, i64({1}, {5}), i64({1}, {2}), std::nullopt, std::nullopt});
  EXPECT_EQ(empty.shape, (Shape{0}));
  AttributeMap v9;
  v9.set_ints("starts", {1, -2});
  v9.set_ints("ends", {2, 1000});
  RefTensor m = run_one("Slice", {iota_f32({3, 4})}, v9, 9);
  EXPECT_EQ(m.shape, (Shape{1, 2}));
  EXPECT_EQ(values_of(m), (std::vector<double>{0.0, 0.5}));  // row 1, columns 2..3
  EXPECT_FALSE(
      run_op("Slice", {x, i64({1}, {0}), i64({1}, {5}), std::nullopt, i64({1}, {0})}).is_ok());
}

TEST(ReferenceGather, NegativeIndicesAnyAxisAndRangeErrors) {
  Tensor data = iota_f32({2, 3});
  RefTensor g = run_one("Gather", {data, i64({2, 2}, {-1, 0, 1, 1})}, attrs({{"axis", 1}}));
  EXPECT_EQ(g.shape, (Shape{2, 2, 2}));
  EXPECT_EQ(g.floats, (std::vector<double>{-2, -3, -2.5, -2.5, -0.5, -1.5, -1, -1}));
  RefTensor scalar = run_one("Gather", {data, i64({}, {1})});
  EXPECT_EQ(scalar.shape, (Shape{3}));
  auto out_of_range = run_op("Gather", {data, i64({1}, {2})});
  ASSERT_FALSE(out_of_range.is_ok());
  EXPECT_EQ(out_of_range.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(out_of_range.status().message().find("node 'the_node' (Gather)"), std::string::npos);
}

TEST(ReferenceExpand, BroadcastsBothWays) {
  RefTensor y = run_one("Expand", {f32({3, 1}, {1, 2, 3}), i64({3}, {2, 1, 2})});
  EXPECT_EQ(y.shape, (Shape{2, 3, 2}));
  EXPECT_EQ(y.floats, (std::vector<double>{1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3}));
  EXPECT_FALSE(run_op("Expand", {f32({3}, {1, 2, 3}), i64({1}, {2})}).is_ok());
}

TEST(ReferenceGenerators, ShapeRangeConstantOfShapeConstant) {
  Tensor x = random_f32({2, 3, 4, 5}, 12);
  EXPECT_EQ(run_one("Shape", {x}).ints, (std::vector<int64_t>{2, 3, 4, 5}));
  EXPECT_EQ(run_one("Shape", {x}, attrs({{"start", 1}, {"end", -1}}), 15).ints,
            (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(run_one("Shape", {x}, attrs({{"start", -10}, {"end", 100}}), 15).ints.size(), 4u);
  EXPECT_EQ(run_one("Range", {i64({}, {10}), i64({}, {1}), i64({}, {-3})}).ints,
            (std::vector<int64_t>{10, 7, 4}));
  EXPECT_EQ(values_of(run_one("Range", {f32({}, {0.5f}), f32({}, {2.0f}), f32({}, {0.5f})})),
            (std::vector<double>{0.5, 1.0, 1.5}));
  AttributeMap fill;
  fill.set_tensor("value", i32({1}, {7}));
  RefTensor c = run_one("ConstantOfShape", {i64({2}, {2, 2})}, fill);
  EXPECT_EQ(c.dtype, DType::kI32);
  EXPECT_EQ(c.ints, (std::vector<int64_t>{7, 7, 7, 7}));
  EXPECT_EQ(run_one("ConstantOfShape", {i64({1}, {3})}).floats, (std::vector<double>{0, 0, 0}));
  AttributeMap value;
  value.set_ints("value_ints", {4, -5});
  RefTensor k = run_one("Constant", {}, value, 13);
  EXPECT_EQ(k.dtype, DType::kI64);
  EXPECT_EQ(k.ints, (std::vector<int64_t>{4, -5}));
  value.set_float("value_float", 1.5f);
  EXPECT_FALSE(run_op("Constant", {}, value, 13).is_ok());  // two values
}

}  // namespace
}  // namespace strider
