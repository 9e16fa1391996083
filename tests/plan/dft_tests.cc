// DFT: the runtime's MatMul expansion against the reference's direct sums, with what the
// ONNX node tests leave out: dft_length that zero-pads and that cuts the signal, a complex
// one-sided forward transform, an inverse one-sided transform given more bins than it
// uses, an axis in the middle of three signal dims, and f64. Both layouts.
#include <gtest/gtest.h>

#include "ir/builder.h"
#include "plan_test_util.h"
#include "reference/reference.h"
#include "strider/compare.h"

namespace strider {
namespace {

struct Case {
  Shape x;
  int64_t axis = 1;
  std::optional<int64_t> length;
  bool inverse = false, onesided = false;
  DType dtype = DType::kF32;
};

void expect_matches_reference(const Case& c) {
  GraphBuilder b(20);
  ValueId x = b.input("x", c.dtype, c.x);
  std::vector<ValueId> in{x, kNoValue, b.constant("axis", Tensor::from_values<int64_t>(DType::kI64, {}, std::vector<int64_t>{c.axis}))};
  if (c.length) in[1] = b.constant("length", Tensor::from_values<int64_t>(DType::kI64, {}, std::vector<int64_t>{*c.length}));
  AttributeMap attributes;
  attributes.set_int("inverse", c.inverse);
  attributes.set_int("onesided", c.onesided);
  b.output(b.op("DFT", in, attributes, "dft"));
  testing::expect_session_matches_reference(b.build(), SessionOptions{},
                                            *convert_float_tensor(testing::random_f32(c.x, 5), c.dtype), c.dtype);
}

TEST(Dft, LengthThatPadsAndLengthThatCuts) {
  expect_matches_reference({{2, 7, 1}, 1, 12});
  expect_matches_reference({{2, 9, 2}, 1, 5});
}

TEST(Dft, ComplexOneSidedForward) { expect_matches_reference({{1, 8, 3, 2}, 1, std::nullopt, false, true}); }

TEST(Dft, OneSidedInverseGivenMoreBinsThanItUses) {
  expect_matches_reference({{2, 9, 2}, 1, 10, true, true});  // 9 bins given, 6 used
}

TEST(Dft, AxisInTheMiddleAndDouble) {
  expect_matches_reference({{2, 3, 6, 4, 2}, 2, std::nullopt, false, false, DType::kF64});
  expect_matches_reference({{2, 3, 6, 4, 2}, -3, std::nullopt, true, false});
}

}  // namespace
}  // namespace strider
