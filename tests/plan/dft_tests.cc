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

struct DftCase {
  Shape x;
  int64_t axis = 1;
  std::optional<int64_t> length;
  bool inverse = false, onesided = false;
  DType dtype = DType::kF32;
};

void expect_matches_reference(const DftCase& c) {
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

// MelWeightMatrix folds to a constant at session creation; it matches the reference's
// (written apart from ops/mel_weights.h) for speech-like settings, and an edge above the
// Nyquist frequency is refused with a message.
Graph mel_graph(int64_t bins, int64_t length, int64_t rate, float low, float high, int64_t dtype_code) {
  GraphBuilder b(17);
  auto i64 = [&](const char* name, int64_t v) { return b.constant(name, Tensor::from_values<int64_t>(DType::kI64, {}, std::vector<int64_t>{v})); };
  auto f32 = [&](const char* name, float v) { return b.constant(name, Tensor::from_values<float>(DType::kF32, {}, std::vector<float>{v})); };
  ValueId x = b.input("x", DType::kF32, {1});
  ValueId mel = b.op("MelWeightMatrix", {i64("bins", bins), i64("length", length), i64("rate", rate), f32("low", low), f32("high", high)},
                     int_attribute("output_datatype", dtype_code));
  b.output(b.op("Mul", {mel, b.op("Cast", {x}, int_attribute("to", dtype_code))}));
  return b.build();
}

TEST(MelWeightMatrix, FoldsToTheReferencesFilters) {
  for (auto [bins, length, rate, low, high] : {std::tuple{40, 512, 16000, 0.0f, 8000.0f}, std::tuple{8, 64, 8000, 100.0f, 3500.0f},
                                              std::tuple{80, 400, 16000, 20.0f, 7600.0f}}) {
    SCOPED_TRACE(std::to_string(bins) + " bins of " + std::to_string(length));
    Graph g = mel_graph(bins, length, rate, low, high, 1);
    Tensor one = Tensor::from_values<float>(DType::kF32, {1}, std::vector<float>{1.0f});
    testing::expect_session_matches_reference(g, SessionOptions{}, one, DType::kF32);
  }
}

TEST(MelWeightMatrix, AnEdgeAboveNyquistIsRefused) {
  auto session = create_session(mel_graph(10, 64, 8000, 0.0f, 9000.0f, 1), SessionOptions{});
  ASSERT_FALSE(session.is_ok());
  EXPECT_NE(session.status().message().find("outside the 33 spectrum bins"), std::string::npos) << session.status().to_string();
}

}  // namespace
}  // namespace strider
