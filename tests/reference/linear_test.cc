// MatMul, Gemm, Conv, BatchNormalization and Softmax against hand values and independent
// formulas written differently from the implementation (explicit padding, plain loops).
#include <gtest/gtest.h>

#include <cmath>

#include "test_util.h"

namespace strider {
namespace {

using namespace strider::testing;

TEST(ReferenceMatMul, VectorsAndBatchBroadcast) {
  RefTensor vm = run_one("MatMul", {f32({2}, {1, 2}), f32({2, 3}, {1, 2, 3, 4, 5, 6})});
  EXPECT_EQ(vm.shape, (Shape{3}));
  EXPECT_EQ(vm.floats, (std::vector<double>{9, 12, 15}));
  RefTensor vv = run_one("MatMul", {f32({3}, {1, 2, 3}), f32({3}, {4, 5, 6})});
  EXPECT_EQ(vv.shape, (Shape{}));
  EXPECT_EQ(vv.floats, (std::vector<double>{32}));
  Tensor a = random_f32({2, 1, 2, 3}, 20), b = random_f32({3, 3, 4}, 21);
  RefTensor c = run_one("MatMul", {a, b});
  ASSERT_EQ(c.shape, (Shape{2, 3, 2, 4}));
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int m = 0; m < 2; ++m)
        for (int n = 0; n < 4; ++n) {
          double sum = 0;
          for (int k = 0; k < 3; ++k)
            sum += double(a.data<float>()[(i * 2 + m) * 3 + k]) *
                   double(b.data<float>()[(j * 3 + k) * 4 + n]);
          EXPECT_NEAR(c.floats[size_t(((i * 3 + j) * 2 + m) * 4 + n)], sum, 1e-12);
        }
  EXPECT_FALSE(run_op("MatMul", {random_f32({2, 3}, 1), random_f32({2, 3}, 2)}).is_ok());
}

TEST(ReferenceGemm, TransposesScalesAndBroadcastsC) {
  Tensor a = random_f32({3, 2}, 22), b = random_f32({4, 3}, 23), c = random_f32({4}, 24);
  AttributeMap at = attrs({{"transA", 1}, {"transB", 1}});
  at.set_float("alpha", 0.5f);
  at.set_float("beta", -2.0f);
  RefTensor y = run_one("Gemm", {a, b, c}, at);
  ASSERT_EQ(y.shape, (Shape{2, 4}));
  for (int m = 0; m < 2; ++m)
    for (int n = 0; n < 4; ++n) {
      double sum = 0;
      for (int k = 0; k < 3; ++k)
        sum += double(a.data<float>()[k * 2 + m]) * double(b.data<float>()[n * 3 + k]);
      EXPECT_NEAR(y.floats[size_t(m * 4 + n)], 0.5 * sum - 2.0 * double(c.data<float>()[n]), 1e-12);
    }
  RefTensor no_c = run_one("Gemm", {f32({1, 2}, {1, 2}), f32({2, 1}, {3, 4})}, {}, 13);
  EXPECT_EQ(no_c.floats, (std::vector<double>{11}));
}

struct ConvCase {
  Shape x, w;
  int64_t group;
  std::vector<int64_t> strides, dilations, pads;
};

// Conv by explicit zero padding and direct correlation (2-D only).
std::vector<double> conv2d_by_padding(const Tensor& x, const Tensor& w, const Tensor& b,
                                      const ConvCase& c, Shape* out_shape) {
  int64_t n = c.x[0], ch = c.x[1], h = c.x[2], wd = c.x[3], m = c.w[0], kh = c.w[2], kw = c.w[3];
  int64_t ph = h + c.pads[0] + c.pads[2], pw = wd + c.pads[1] + c.pads[3];
  std::vector<double> padded(size_t(n * ch * ph * pw), 0.0);
  for (int64_t i = 0; i < n * ch; ++i)
    for (int64_t y = 0; y < h; ++y)
      for (int64_t z = 0; z < wd; ++z)
        padded[size_t((i * ph + y + c.pads[0]) * pw + z + c.pads[1])] =
            x.data<float>()[(i * h + y) * wd + z];
  int64_t oh = (ph - (kh - 1) * c.dilations[0] - 1) / c.strides[0] + 1;
  int64_t ow = (pw - (kw - 1) * c.dilations[1] - 1) / c.strides[1] + 1;
  *out_shape = {n, m, oh, ow};
  int64_t cg = ch / c.group, mg = m / c.group;
  std::vector<double> out;
  for (int64_t in = 0; in < n; ++in)
    for (int64_t om = 0; om < m; ++om)
      for (int64_t y = 0; y < oh; ++y)
        for (int64_t z = 0; z < ow; ++z) {
          double sum = b.data<float>()[om];
          for (int64_t ic = 0; ic < cg; ++ic)
            for (int64_t a = 0; a < kh; ++a)
              for (int64_t d = 0; d < kw; ++d) {
                int64_t channel = (om / mg) * cg + ic;
                double xv = padded[size_t(
                    ((in * ch + channel) * ph + y * c.strides[0] + a * c.dilations[0]) * pw +
                    z * c.strides[1] + d * c.dilations[1])];
                sum += xv * w.data<float>()[((om * cg + ic) * kh + a) * kw + d];
              }
          out.push_back(sum);
        }
  return out;
}

TEST(ReferenceConv, MatchesExplicitPaddingForStridesDilationsGroups) {
  std::vector<ConvCase> cases = {
      {{1, 3, 7, 6}, {4, 3, 3, 3}, 1, {1, 1}, {1, 1}, {1, 1, 1, 1}},
      {{2, 4, 9, 8}, {6, 2, 3, 2}, 2, {2, 3}, {1, 2}, {0, 1, 2, 0}},
      {{1, 6, 8, 8}, {6, 1, 3, 3}, 6, {2, 2}, {2, 2}, {2, 2, 2, 2}},
  };
  uint32_t seed = 30;
  for (const ConvCase& c : cases) {
    Tensor x = random_f32(c.x, seed++), w = random_f32(c.w, seed++),
           b = random_f32({c.w[0]}, seed++);
    AttributeMap a = attrs({{"group", c.group}});
    a.set_ints("strides", c.strides);
    a.set_ints("dilations", c.dilations);
    a.set_ints("pads", c.pads);
    RefTensor y = run_one("Conv", {x, w, b}, a);
    Shape expected_shape;
    std::vector<double> expected = conv2d_by_padding(x, w, b, c, &expected_shape);
    EXPECT_EQ(y.shape, expected_shape);
    expect_near_all(values_of(y), expected, 1e-12);
  }
}

TEST(ReferenceConv, AutoPadSameUpperAndLowerPutTheOddPadOnOppositeSides) {
  // 1-D: x = [1, 2, 3, 4], kernel [1, 10] (so y[i] = x[i - pb] + 10 x[i - pb + 1]), stride 1.
  Tensor x = f32({1, 1, 4}, {1, 2, 3, 4}), w = f32({1, 1, 2}, {1, 10});
  AttributeMap upper, lower;
  upper.set_string("auto_pad", "SAME_UPPER");
  lower.set_string("auto_pad", "SAME_LOWER");
  EXPECT_EQ(run_one("Conv", {x, w, std::nullopt}, upper).floats,
            (std::vector<double>{21, 32, 43, 4}));
  EXPECT_EQ(run_one("Conv", {x, w, std::nullopt}, lower).floats,
            (std::vector<double>{10, 21, 32, 43}));
  AttributeMap valid;
  valid.set_string("auto_pad", "VALID");
  valid.set_ints("strides", {2});
  EXPECT_EQ(run_one("Conv", {x, w, std::nullopt}, valid).floats, (std::vector<double>{21, 43}));
}

TEST(ReferenceConv, ThreeDimensionalSumsEveryTap) {
  // With all-positive weights summing a 2x2x2 block of a ramp, each output is a hand sum.
  Tensor x(DType::kF32, {1, 1, 2, 3, 3});
  for (int i = 0; i < 18; ++i) x.data<float>()[i] = float(i);
  Tensor w = f32({1, 1, 2, 2, 2}, {1, 1, 1, 1, 1, 1, 1, 1});
  RefTensor y = run_one("Conv", {x, w});
  EXPECT_EQ(y.shape, (Shape{1, 1, 1, 2, 2}));
  // block at (0,0,0): 0+1+3+4 + 9+10+12+13 = 52; each step right adds 8, down adds 24.
  EXPECT_EQ(y.floats, (std::vector<double>{52, 60, 76, 84}));
  EXPECT_FALSE(run_op("Conv", {x, f32({1, 2, 1, 1, 1}, {1, 1})}).is_ok());  // channel mismatch
}

TEST(ReferenceBatchNormalization, InferenceFormulaAcrossVersions) {
  Tensor x = random_f32({2, 3, 2, 2}, 40);
  Tensor scale = f32({3}, {1.5f, -0.5f, 2.0f}), bias = f32({3}, {0.1f, 0.2f, 0.3f});
  Tensor mean = f32({3}, {0.5f, -0.25f, 0.0f}), var = f32({3}, {1.0f, 0.5f, 2.0f});
  AttributeMap eps;
  eps.set_float("epsilon", 1e-3f);
  for (int opset : {9, 15}) {
    RefTensor y = run_one("BatchNormalization", {x, scale, bias, mean, var}, eps, opset);
    for (int i = 0; i < 24; ++i) {
      int c = (i / 4) % 3;
      double expected = (double(x.data<float>()[i]) - double(mean.data<float>()[c])) /
                            std::sqrt(double(var.data<float>()[c]) + double(1e-3f)) *
                            double(scale.data<float>()[c]) +
                        double(bias.data<float>()[c]);
      EXPECT_NEAR(y.floats[size_t(i)], expected, 1e-12);
    }
  }
  auto training =
      run_op("BatchNormalization", {x, scale, bias, mean, var}, attrs({{"training_mode", 1}}), 15);
  ASSERT_FALSE(training.is_ok());
  EXPECT_EQ(training.status().code(), StatusCode::kUnsupported);
}

TEST(ReferenceSoftmax, Opset11CoercesTo2DOpset13RunsAlongTheAxis) {
  Tensor x = random_f32({2, 3, 4}, 41);
  RefTensor old = run_one("Softmax", {x}, {}, 11);                    // axis 1: rows of 12
  RefTensor now = run_one("Softmax", {x}, attrs({{"axis", 1}}), 13);  // along the 3
  double row = 0;
  for (int i = 0; i < 12; ++i) row += old.floats[size_t(i)];
  EXPECT_NEAR(row, 1.0, 1e-12);
  double column = now.floats[0] + now.floats[4] + now.floats[8];
  EXPECT_NEAR(column, 1.0, 1e-12);
  double denominator = 0;
  for (int j = 0; j < 3; ++j) denominator += std::exp(double(x.data<float>()[j * 4 + 1]));
  EXPECT_NEAR(now.floats[1], std::exp(double(x.data<float>()[1])) / denominator, 1e-12);
  RefTensor log = run_one("LogSoftmax", {x}, {}, 13);  // default axis -1
  double last = 0;
  for (int k = 0; k < 4; ++k) last += std::exp(double(x.data<float>()[k]));
  EXPECT_NEAR(log.floats[0], double(x.data<float>()[0]) - std::log(last), 1e-12);
}

}  // namespace
}  // namespace strider
