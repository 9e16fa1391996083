// The oracle on operands a hostile model can give it: a quantization scale or zero point
// that is empty or of the wrong type, a scalar input with no element, a blocked scale of
// the wrong shape. Each is an error naming the operand, never a read past an empty vector
// (CI's fuzzer found one: a float parameter of zero elements read as element 0).
#include <gtest/gtest.h>

#include <string>

#include "test_util.h"

namespace strider {
namespace {

using namespace strider::testing;

Tensor random_u8(Shape shape, uint32_t seed) {
  std::mt19937 engine(seed);
  Tensor t(DType::kU8, std::move(shape));
  for (int64_t i = 0; i < t.num_elements(); ++i) t.data<uint8_t>()[i] = uint8_t(engine() % 256);
  return t;
}

// The operands of a valid QLinearMatMul [2, 3] x [3, 4]: per-row a scale, per-column b scale.
std::vector<std::optional<Tensor>> qlinear_matmul_operands() {
  return {random_u8({2, 3}, 1), f32({2}, {0.02f, 0.03f}), u8({}, {3}),
          random_u8({3, 4}, 2), f32({4}, {0.01f, 0.02f, 0.015f, 0.05f}), u8({}, {7}),
          f32({}, {0.4f}), u8({}, {11})};
}

void expect_error_naming(const Result<std::vector<RefTensor>>& result, const std::string& what) {
  ASSERT_FALSE(result.is_ok());
  EXPECT_NE(result.status().to_string().find(what), std::string::npos) << result.status().to_string();
}

TEST(ReferenceGuards, QLinearMatMulChecksEveryScaleAndZeroPoint) {
  ASSERT_TRUE(run_op("QLinearMatMul", qlinear_matmul_operands()).is_ok());
  struct Case {
    size_t operand;
    Tensor value;
    std::string named;
  };
  const Case cases[] = {
      {6, f32({0}, {}), "y_scale"},            // empty: was read as element 0
      {6, i64({}, {1}), "y_scale"},            // an integer scale has no floats at all
      {7, u8({0}, {}), "y_zero_point"},
      {1, f32({3}, {0.1f, 0.2f, 0.3f}), "a_scale"},  // neither one nor one per row
      {4, f32({0}, {}), "b_scale"},
      {5, f32({}, {2.0f}), "b_zero_point"},   // a zero point must be an integer
  };
  for (const Case& c : cases) {
    auto operands = qlinear_matmul_operands();
    operands[c.operand] = c.value;
    expect_error_naming(run_op("QLinearMatMul", operands), c.named);
  }
}

TEST(ReferenceGuards, QLinearConvChecksItsScalesAndBias) {
  std::vector<std::optional<Tensor>> operands = {
      random_u8({1, 2, 3, 3}, 3), f32({}, {0.02f}), u8({}, {5}), random_u8({2, 2, 1, 1}, 4),
      f32({2}, {0.01f, 0.03f}), u8({}, {9}), f32({}, {0.5f}), u8({}, {4})};
  ASSERT_TRUE(run_op("QLinearConv", operands).is_ok());
  auto empty_y_scale = operands;
  empty_y_scale[6] = f32({0}, {});
  expect_error_naming(run_op("QLinearConv", empty_y_scale), "y_scale");
  auto empty_x_scale = operands;
  empty_x_scale[1] = f32({0}, {});
  expect_error_naming(run_op("QLinearConv", empty_x_scale), "x_scale");
  auto short_bias = operands;
  short_bias.push_back(i32({1}, {17}));
  expect_error_naming(run_op("QLinearConv", short_bias), "input 8 (B)");
  auto float_x = operands;
  float_x[0] = random_f32({1, 2, 3, 3}, 5);
  expect_error_naming(run_op("QLinearConv", float_x), "input 0 (x)");
}

TEST(ReferenceGuards, ConvIntegerNeedsTheChannelAxis) {
  expect_error_naming(run_op("ConvInteger", {u8({3}, {1, 2, 3}), u8({1, 1, 1}, {2})}), "input 0 (x)");
}

TEST(ReferenceGuards, QuantizeLinearScalesAreFloatingAndBlocksFit) {
  Tensor x = random_f32({2, 4}, 6);
  expect_error_naming(run_op("QuantizeLinear", {x, i64({}, {2})}, {}, 21), "y_scale");
  Tensor q = random_u8({2, 4}, 7);
  AttributeMap blocked = attrs({{"axis", 1}, {"block_size", 2}});
  ASSERT_TRUE(run_op("DequantizeLinear", {q, f32({2, 2}, {0.1f, 0.2f, 0.3f, 0.4f})}, blocked, 21).is_ok());
  EXPECT_FALSE(run_op("DequantizeLinear", {q, f32({2, 1}, {0.1f, 0.2f})}, blocked, 21).is_ok());
  EXPECT_FALSE(run_op("DequantizeLinear", {q, f32({2, 2}, {0.1f, 0.2f, 0.3f, 0.4f})},
                      attrs({{"axis", 1}, {"block_size", -2}}), 21)
                   .is_ok());
}

TEST(ReferenceGuards, ScalarInputsWithoutAnElementAreErrors) {
  Tensor signal = random_f32({1, 8, 1}, 8);
  expect_error_naming(run_op("DFT", {signal, f32({0}, {})}, {}, 20), "dft_length");
  expect_error_naming(run_op("DFT", {signal, std::nullopt, f32({0}, {})}, {}, 20), "axis");
  expect_error_naming(run_op("STFT", {signal, f32({0}, {}), std::nullopt, i64({}, {4})}, {}, 17), "frame_step");
  expect_error_naming(run_op("STFT", {signal, i64({}, {2}), std::nullopt, i64({0}, {})}, {}, 17), "frame_length");
  expect_error_naming(run_op("AffineGrid", {random_f32({1, 2, 3}, 9), f32({4}, {1, 1, 2, 2})}, {}, 20), "size");
}

// DeformConv's B and mask, which past libonnx's opsets nothing checked before the oracle:
// an int32 B (the fuzzer's: its floats were empty), a B and a mask of the wrong size.
TEST(ReferenceGuards, DeformConvBiasAndMaskOfTheWrongTypeOrSize) {
  Tensor x = random_f32({1, 1, 3, 3}, 10), w = random_f32({1, 1, 2, 2}, 11), offset = random_f32({1, 8, 2, 2}, 12);
  expect_error_naming(run_op("DeformConv", {x, w, offset, i32({1}, {3})}, {}, 22), "DeformConv");
  expect_error_naming(run_op("DeformConv", {x, w, offset, random_f32({2}, 13)}, {}, 22), "DeformConv");
  expect_error_naming(run_op("DeformConv", {x, w, offset, std::nullopt, random_f32({1, 4, 2, 1}, 14)}, {}, 22), "DeformConv");
  EXPECT_TRUE(run_op("DeformConv", {x, w, offset, random_f32({1}, 15), random_f32({1, 4, 2, 2}, 16)}, {}, 22).is_ok());
}

}  // namespace
}  // namespace strider
