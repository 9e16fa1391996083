// The 16-bit and the wide unsigned integers (i16, u16, u32, u64) compute in their own type on
// every device that takes them, bit for bit as the reference says: u64 values above INT64_MAX
// compare, divide, shift and convert as unsigned numbers (the reference holds them as int64
// bit patterns, so this is where a signed slip in either would show), and i16 wraps.
#include <gtest/gtest.h>

#include <cstring>

#include "ir/builder.h"
#include "reference/reference.h"
#include "exec/session_internal.h"

namespace strider {
namespace {

constexpr uint64_t kTop = uint64_t(1) << 63;

// The outputs' elements as raw 64-bit patterns (every integer dtype widened by its own type).
std::vector<uint64_t> bits_of(const Tensor& t) {
  std::vector<uint64_t> out;
  for (int64_t i = 0; i < t.num_elements(); ++i) out.push_back(uint64_t(t.element_as_int(i)));
  return out;
}

class WideIntegers : public ::testing::TestWithParam<const char*> {};

TEST_P(WideIntegers, ComputeAsTheirOwnTypeBitForBit) {
  GraphBuilder b(18);
  ValueId a = b.input("a", DType::kU64, {6}), c = b.input("c", DType::kU64, {6}), s = b.input("s", DType::kU64, {6});
  b.output(b.op("Less", {a, c}));
  b.output(b.op("Max", {a, c}));
  b.output(b.op("Div", {a, c}));
  b.output(b.op("Mod", {a, c}));
  AttributeMap right;
  right.set_string("direction", "RIGHT");
  b.output(b.op("BitShift", {a, s}, right));
  b.output(b.op("BitwiseXor", {a, c}));
  ValueId h = b.input("h", DType::kI16, {4});
  b.output(b.op("Add", {h, h}));
  b.output(b.op("BitwiseNot", {h}));
  const std::vector<uint64_t> av = {kTop + 5, 3, ~uint64_t(0), kTop, 77, kTop + 1000};
  const std::vector<uint64_t> cv = {7, kTop, 2, kTop + 1, 5, 3};
  const std::vector<uint64_t> sv = {1, 0, 63, 64, 2, 7};
  std::map<std::string, Tensor> inputs = {
      {"a", Tensor::from_values<uint64_t>(DType::kU64, {6}, av)},
      {"c", Tensor::from_values<uint64_t>(DType::kU64, {6}, cv)},
      {"s", Tensor::from_values<uint64_t>(DType::kU64, {6}, sv)},
      {"h", Tensor::from_values<int16_t>(DType::kI16, {4}, std::vector<int16_t>{32767, -32768, -3, 1234})}};
  Graph graph = b.build();
  auto expected = evaluate_reference(graph, inputs);
  ASSERT_TRUE(expected.is_ok()) << expected.status().to_string();
  // The oracle itself, on the cases a signed slip would break.
  EXPECT_EQ(expected->outputs[0].ints, (std::vector<int64_t>{0, 1, 0, 1, 0, 0}));
  EXPECT_EQ(uint64_t(expected->outputs[2].ints[0]), (kTop + 5) / 7);
  EXPECT_EQ(uint64_t(expected->outputs[2].ints[2]), ~uint64_t(0) / 2);
  EXPECT_EQ(uint64_t(expected->outputs[3].ints[5]), (kTop + 1000) % 3);
  EXPECT_EQ(uint64_t(expected->outputs[4].ints[2]), 1u);  // 2^64-1 >> 63
  EXPECT_EQ(expected->outputs[4].ints[3], 0);              // a shift by the width gives 0
  EXPECT_EQ(expected->outputs[6].ints, (std::vector<int64_t>{-2, 0, -6, 2468}));
  EXPECT_EQ(expected->outputs[7].ints, (std::vector<int64_t>{-32768, 32767, 2, -1235}));

  SessionOptions options;
  options.device = GetParam();
  auto session = create_session(graph, options);
  ASSERT_TRUE(session.is_ok()) << session.status().to_string();
  std::vector<Tensor> given;
  for (const ValueInfo& info : (*session)->inputs()) given.push_back(inputs.at(info.name));
  auto outputs = (*session)->run(given);
  ASSERT_TRUE(outputs.is_ok()) << outputs.status().to_string();
  ASSERT_EQ(outputs->size(), expected->outputs.size());
  for (size_t i = 0; i < outputs->size(); ++i) {
    std::vector<uint64_t> want;
    for (int64_t v : expected->outputs[i].ints) want.push_back(uint64_t(v));
    EXPECT_EQ(bits_of((*outputs)[i]), want) << "output " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, WideIntegers, ::testing::Values("cpu", "sim"));

}  // namespace
}  // namespace strider
