// ConvTranspose: the runtime's expansion (spread, pad or crop, Conv with rewritten weights)
// against the reference's scatter, with what the ONNX node tests leave out: constant
// weights (the rewrite folds at creation), groups with strides and dilations together,
// output_padding, pads that crop more than the kernel reaches, output_shape with each
// auto_pad rule, 1-D and 3-D. Both layouts.
#include <gtest/gtest.h>

#include "ir/builder.h"
#include "plan_test_util.h"
#include "reference/reference.h"
#include "strider/compare.h"

namespace strider {
namespace {

using testing::random_f32;

struct ConvTransposeCase {
  Shape x, w;
  AttributeMap attributes;
  bool bias = true;
};

void expect_matches_reference(const ConvTransposeCase& c, const std::string& layout) {
  GraphBuilder b(17);
  ValueId x = b.input("x", DType::kF32, c.x);
  std::vector<ValueId> in{x, b.constant("w", random_f32(c.w, 2))};
  if (c.bias) in.push_back(b.constant("b", random_f32({c.w[1] * c.attributes.get_int("group", 1).value()}, 3)));
  b.output(b.op("ConvTranspose", in, c.attributes, "up"));
  SessionOptions options;
  options.layout = *parse_layout(layout);
  testing::expect_session_matches_reference(b.build(), options, random_f32(c.x, 1), DType::kF32);
}

AttributeMap attributes(std::initializer_list<std::pair<const char*, std::vector<int64_t>>> ints, int64_t group = 1,
                        std::string auto_pad = "") {
  AttributeMap a;
  for (const auto& [name, values] : ints) a.set_ints(name, values);
  if (group != 1) a.set_int("group", group);
  if (!auto_pad.empty()) a.set_string("auto_pad", auto_pad);
  return a;
}

class ConvTranspose : public ::testing::TestWithParam<std::string> {};

TEST_P(ConvTranspose, GroupsStridesDilationsAndOutputPadding) {
  expect_matches_reference({{2, 4, 5, 6}, {4, 3, 3, 2},
                            attributes({{"strides", {2, 3}}, {"dilations", {2, 1}}, {"output_padding", {1, 2}},
                                        {"pads", {1, 0, 2, 1}}}, 2)},
                           GetParam());
}

TEST_P(ConvTranspose, PadsThatCropMoreThanTheKernelReaches) {
  expect_matches_reference({{1, 3, 6, 6}, {3, 2, 2, 2}, attributes({{"strides", {2, 2}}, {"pads", {3, 2, 1, 3}}})},
                           GetParam());
}

TEST_P(ConvTranspose, OutputShapeWithEachAutoPadRule) {
  for (const char* rule : {"NOTSET", "SAME_UPPER", "SAME_LOWER"})
    expect_matches_reference({{1, 2, 4, 3}, {2, 2, 3, 3},
                              attributes({{"strides", {3, 2}}, {"output_shape", {13, 8}}}, 1, rule), false},
                             GetParam());
}

TEST_P(ConvTranspose, OneAndThreeSpatialDims) {
  expect_matches_reference({{2, 4, 7}, {4, 1, 3}, attributes({{"strides", {2}}}, 4)}, GetParam());
  expect_matches_reference({{1, 2, 3, 4, 3}, {2, 2, 2, 3, 2}, attributes({{"strides", {2, 1, 2}}, {"pads", {0, 1, 1, 1, 0, 0}}})},
                           GetParam());
}

INSTANTIATE_TEST_SUITE_P(Layouts, ConvTranspose, ::testing::Values("nchw", "nhwc"));

}  // namespace
}  // namespace strider
