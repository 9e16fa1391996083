#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "test_util.h"

namespace strider {
namespace {

using namespace strider::testing;

// [[1, 5, 2], [7, 3, 9], [4, 8, 6]]
Tensor pool_input() { return f32({1, 1, 3, 3}, {1, 5, 2, 7, 3, 9, 4, 8, 6}); }

TEST(ReferenceMaxPool, ValuesAndIndicesInBothStorageOrders) {
  AttributeMap a;
  a.set_ints("kernel_shape", {2, 2});
  for (int64_t order : {0, 1}) {
    a.set_int("storage_order", order);
    auto r = run_op("MaxPool", {pool_input()}, a, 12, 2);
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    EXPECT_EQ((*r)[0].floats, (std::vector<double>{7, 9, 8, 9}));
    std::vector<int64_t> expected =
        order == 0 ? std::vector<int64_t>{3, 5, 7, 5} : std::vector<int64_t>{1, 7, 5, 7};
    EXPECT_EQ((*r)[1].ints, expected);
  }
  a.set_ints("pads", {1, 1, 1, 1});
  a.set_ints("strides", {2, 2});
  EXPECT_EQ(run_one("MaxPool", {pool_input()}, a).floats, (std::vector<double>{1, 5, 7, 9}));
}

TEST(ReferenceMaxPool, CeilModeDropsAWindowThatWouldStartInTheRightPadding) {
  AttributeMap a = attrs({{"ceil_mode", 1}});
  a.set_ints("kernel_shape", {2});
  a.set_ints("strides", {2});
  Tensor x = f32({1, 1, 5}, {3, 1, 4, 1, 5});
  EXPECT_EQ(run_one("MaxPool", {x}, a).floats, (std::vector<double>{3, 4, 5}));
  a.set_ints("kernel_shape", {1});
  a.set_ints("pads", {0, 1});
  Tensor y = f32({1, 1, 2}, {3, 1});
  // ceil((2 + 1 - 1) / 2) + 1 = 2 windows, starting at 0 and 2; the second starts in the
  // right padding. The spec notes the drop from opset 22; older opsets are read alike.
  for (int opset : {12, 21, 22}) {
    RefTensor v = run_one("MaxPool", {y}, a, opset);
    EXPECT_EQ(v.shape, (Shape{1, 1, 1})) << opset;
    EXPECT_EQ(v.floats, (std::vector<double>{3})) << opset;
  }
}

TEST(ReferenceAveragePool, CountIncludePadChangesTheDivisor) {
  AttributeMap a;
  a.set_ints("kernel_shape", {2, 2});
  a.set_ints("pads", {1, 1, 1, 1});
  a.set_ints("strides", {2, 2});
  EXPECT_EQ(run_one("AveragePool", {pool_input()}, a).floats,
            (std::vector<double>{1, 3.5, 5.5, 6.5}));
  a.set_int("count_include_pad", 1);
  EXPECT_EQ(run_one("AveragePool", {pool_input()}, a).floats,
            (std::vector<double>{0.25, 1.75, 2.75, 6.5}));
  a.set_ints("dilations", {2, 2});
  a.set_ints("pads", {0, 0, 0, 0});
  a.set_int("count_include_pad", 0);
  EXPECT_EQ(run_one("AveragePool", {pool_input()}, a, 19).floats,
            (std::vector<double>{(1 + 2 + 4 + 6) / 4.0}));
}

TEST(ReferenceGlobalAveragePool, MeanPerPlane) {
  Tensor x = random_f32({2, 3, 4, 5}, 50);
  RefTensor y = run_one("GlobalAveragePool", {x});
  EXPECT_EQ(y.shape, (Shape{2, 3, 1, 1}));
  for (int plane = 0; plane < 6; ++plane) {
    double sum = 0;
    for (int i = 0; i < 20; ++i) sum += double(x.data<float>()[plane * 20 + i]);
    EXPECT_NEAR(y.floats[size_t(plane)], sum / 20, 1e-12);
  }
}

TEST(ReferenceResize, NearestHalfPixelUpsample) {
  Tensor x = f32({1, 1, 2, 2}, {1, 2, 3, 4});
  RefTensor y = run_one("Resize", {x, std::nullopt, f32({4}, {1, 1, 2, 2})}, {}, 13);
  EXPECT_EQ(y.shape, (Shape{1, 1, 4, 4}));
  EXPECT_EQ(y.floats, (std::vector<double>{1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}));
}

TEST(ReferenceResize, LinearHalfPixelAndAlignCorners) {
  AttributeMap linear;
  linear.set_string("mode", "linear");
  Tensor x = f32({1, 1, 1, 2}, {1, 2});
  RefTensor half =
      run_one("Resize", {x, std::nullopt, std::nullopt, i64({4}, {1, 1, 1, 4})}, linear, 13);
  EXPECT_EQ(half.floats, (std::vector<double>{1, 1.25, 1.75, 2}));
  linear.set_string("coordinate_transformation_mode", "align_corners");
  RefTensor corners = run_one(
      "Resize", {f32({1, 1, 1, 2}, {1, 3}), std::nullopt, std::nullopt, i64({4}, {1, 1, 1, 5})},
      linear, 13);
  EXPECT_EQ(corners.floats, (std::vector<double>{1, 1.5, 2, 2.5, 3}));
  // Downscaling by 0.6: align_corners divides by the unfloored length 2.4, not by 2.
  Tensor wide = f32({1, 1, 2, 4}, {1, 2, 3, 4, 5, 6, 7, 8});
  RefTensor down =
      run_one("Resize", {wide, std::nullopt, f32({4}, {1, 1, 0.6f, 0.6f})}, linear, 13);
  EXPECT_EQ(down.shape, (Shape{1, 1, 1, 2}));
  double unfloored = double(0.6f) * 4;
  expect_near_all(values_of(down), {1, 1 + 3 / (unfloored - 1)});
}

TEST(ReferenceResize, CubicWithAMinusHalfReproducesARampInside) {
  AttributeMap cubic;
  cubic.set_string("mode", "cubic");
  cubic.set_float("cubic_coeff_a", -0.5f);
  Tensor x(DType::kF32, {1, 1, 1, 8});
  for (int i = 0; i < 8; ++i) x.data<float>()[i] = float(2 * i + 1);
  RefTensor y = run_one("Resize", {x, std::nullopt, f32({4}, {1, 1, 1, 2})}, cubic, 13);
  ASSERT_EQ(y.shape, (Shape{1, 1, 1, 16}));
  for (int o = 3; o < 12; ++o) {  // all four taps inside the input
    double x_original = (o + 0.5) / 2 - 0.5;
    EXPECT_NEAR(y.floats[size_t(o)], 2 * x_original + 1, 1e-12) << o;
  }
}

TEST(ReferenceResize, LegacyVersionsFloorUpscalingAndCeilDownscaling) {
  Tensor x = f32({1, 1, 2, 2}, {1, 2, 3, 4});
  std::vector<double> expected = {1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2,
                                  3, 3, 3, 4, 4, 4, 3, 3, 3, 4, 4, 4};
  EXPECT_EQ(run_one("Upsample", {x, f32({4}, {1, 1, 2, 3})}, {}, 9).floats, expected);
  AttributeMap scales;
  scales.set_floats("scales", {1, 1, 2, 3});
  EXPECT_EQ(run_one("Upsample", {x}, scales, 7).floats, expected);
  Tensor wide = f32({1, 1, 2, 4}, {1, 2, 3, 4, 5, 6, 7, 8});
  RefTensor down = run_one("Resize", {wide, f32({4}, {1, 1, 0.6f, 0.6f})}, {}, 10);
  EXPECT_EQ(down.shape, (Shape{1, 1, 1, 2}));
  EXPECT_EQ(down.floats, (std::vector<double>{1, 3}));
}

TEST(ReferenceResize, AspectPolicyAxesAndCropWithExtrapolation) {
  AttributeMap policy;
  policy.set_ints("axes", {2, 3});
  policy.set_string("keep_aspect_ratio_policy", "not_larger");
  Tensor x = f32({1, 1, 2, 2}, {1, 2, 3, 4});
  EXPECT_EQ(run_one("Resize", {x, std::nullopt, std::nullopt, i64({2}, {7, 8})}, policy, 18).shape,
            (Shape{1, 1, 7, 7}));
  policy.set_string("keep_aspect_ratio_policy", "not_smaller");
  EXPECT_EQ(run_one("Resize", {x, std::nullopt, std::nullopt, i64({2}, {7, 8})}, policy, 18).shape,
            (Shape{1, 1, 8, 8}));
  AttributeMap crop;
  crop.set_ints("axes", {3});
  crop.set_string("mode", "linear");
  crop.set_string("coordinate_transformation_mode", "tf_crop_and_resize");
  crop.set_float("extrapolation_value", 9.0f);
  Tensor ramp = f32({1, 1, 1, 5}, {0, 1, 2, 3, 4});
  RefTensor y =
      run_one("Resize", {ramp, f32({2}, {0.5f, 1.5f}), std::nullopt, i64({1}, {3})}, crop, 18);
  EXPECT_EQ(y.floats, (std::vector<double>{2, 4, 9}));
}

Tensor reduce_input() { return f32({2, 3}, {1, 2, 3, 4, 5, 6}); }

TEST(ReferenceReduce, AxesAttributeOrInputByVersion) {
  AttributeMap axes = attrs({{"keepdims", 0}});
  axes.set_ints("axes", {1});
  EXPECT_EQ(run_one("ReduceSum", {reduce_input()}, axes, 11).floats, (std::vector<double>{6, 15}));
  RefTensor columns = run_one("ReduceSum", {reduce_input(), i64({1}, {0})}, {}, 13);
  EXPECT_EQ(columns.shape, (Shape{1, 3}));
  EXPECT_EQ(columns.floats, (std::vector<double>{5, 7, 9}));
  RefTensor all = run_one("ReduceSum", {reduce_input()}, {}, 13);
  EXPECT_EQ(all.shape, (Shape{1, 1}));
  EXPECT_EQ(all.floats, (std::vector<double>{21}));
  RefTensor noop = run_one("ReduceSum", {reduce_input(), i64({0}, {})},
                           attrs({{"noop_with_empty_axes", 1}}), 13);
  EXPECT_EQ(noop.floats, (std::vector<double>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(
      run_one("ReduceMean", {reduce_input(), i64({1}, {-1})}, attrs({{"keepdims", 0}}), 18).floats,
      (std::vector<double>{2, 5}));
  axes.set_ints("axes", {0});
  EXPECT_EQ(run_one("ReduceMean", {reduce_input()}, axes, 13).floats,
            (std::vector<double>{2.5, 3.5, 4.5}));
  EXPECT_EQ(run_one("ReduceMax", {reduce_input()}, axes, 13).floats,
            (std::vector<double>{4, 5, 6}));
  EXPECT_EQ(run_one("ReduceMin", {reduce_input(), i64({1}, {1})}, {}, 18).floats,
            (std::vector<double>{1, 4}));
}

TEST(ReferenceReduce, IntegersStayExactAndEdgeCasesFollowTheSpec) {
  int64_t big = (int64_t(1) << 60) + 1;
  EXPECT_EQ(run_one("ReduceSum", {i64({2}, {big, big})}, {}, 13).ints,
            (std::vector<int64_t>{2 * big}));
  EXPECT_EQ(run_one("ReduceMean", {i64({2}, {-7, 0})}, {}, 13).ints, (std::vector<int64_t>{-3}));
  RefTensor lse = run_one("ReduceLogSumExp", {f32({2}, {1000, 1000})}, {}, 13);
  EXPECT_NEAR(lse.floats[0], 1000 + std::log(2.0), 1e-9);
  RefTensor empty_max = run_one("ReduceMax", {f32({0, 3}, {}), i64({1}, {0})}, {}, 18);
  EXPECT_EQ(empty_max.shape, (Shape{1, 3}));
  EXPECT_EQ(empty_max.floats[0], -std::numeric_limits<double>::infinity());
  EXPECT_FALSE(
      run_op("ReduceSum", {reduce_input(), i64({2}, {1, -1})}, {}, 13).is_ok());  // repeated axis
}

}  // namespace
}  // namespace strider
