// The interpreter itself: input checks, constants, multi-node graphs, kept values, the
// support table, and widening / narrowing.
#include <gtest/gtest.h>

#include <cmath>

#include "base/float16.h"
#include "test_util.h"

namespace strider {
namespace {

using namespace strider::testing;

// y = Relu(x @ w + b) with w and b constants; z = Sigmoid(y).
Graph small_mlp(const Tensor& w, const Tensor& b) {
  GraphBuilder g;
  ValueId x = g.input("x", DType::kF32, {-1, 3});
  ValueId wv = g.constant("w", w), bv = g.constant("b", b);
  ValueId h = g.op("MatMul", {x, wv}, {}, "mm");
  ValueId a = g.op("Add", {h, bv}, {}, "add");
  ValueId y = g.op("Relu", {a}, {}, "relu");
  ValueId z = g.op("Sigmoid", {y}, {}, "sigmoid");
  g.output(y);
  g.output(z);
  return g.build();
}

TEST(ReferenceInterpreter, RunsAGraphWithConstantsAndKeepsValuesWhenAsked) {
  Tensor w = random_f32({3, 2}, 60), b = random_f32({2}, 61), x = random_f32({4, 3}, 62);
  Graph graph = small_mlp(w, b);
  auto result = evaluate_reference(graph, {{"x", x}});
  ASSERT_TRUE(result.is_ok()) << result.status().to_string();
  ASSERT_EQ(result->outputs.size(), 2u);
  EXPECT_TRUE(result->values.empty());
  const RefTensor& y = result->outputs[0];
  EXPECT_EQ(y.shape, (Shape{4, 2}));
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 2; ++j) {
      double sum = b.data<float>()[j];
      for (int k = 0; k < 3; ++k)
        sum += double(x.data<float>()[i * 3 + k]) * double(w.data<float>()[k * 2 + j]);
      EXPECT_NEAR(y.floats[size_t(i * 2 + j)], std::max(sum, 0.0), 1e-12);
      EXPECT_NEAR(result->outputs[1].floats[size_t(i * 2 + j)],
                  1 / (1 + std::exp(-std::max(sum, 0.0))), 1e-12);
    }
  auto all = evaluate_reference(graph, {{"x", x}}, true);
  ASSERT_TRUE(all.is_ok());
  ValueId matmul_out = graph.node(0).outputs[0];
  ASSERT_EQ(all->values.count(matmul_out), 1u);
  EXPECT_EQ(all->values.at(matmul_out).shape, (Shape{4, 2}));
  EXPECT_EQ(all->values.count(*graph.find_value("w")), 1u);
}

TEST(ReferenceInterpreter, InputsAreCheckedByNameTypeAndShape) {
  Graph graph = small_mlp(random_f32({3, 2}, 63), random_f32({2}, 64));
  auto missing = evaluate_reference(graph, {});
  ASSERT_FALSE(missing.is_ok());
  EXPECT_NE(missing.status().message().find("'x'"), std::string::npos);
  auto unknown =
      evaluate_reference(graph, {{"x", random_f32({1, 3}, 1)}, {"nope", random_f32({1}, 2)}});
  ASSERT_FALSE(unknown.is_ok());
  EXPECT_NE(unknown.status().message().find("nope"), std::string::npos);
  auto wrong_dim = evaluate_reference(graph, {{"x", random_f32({1, 4}, 3)}});
  ASSERT_FALSE(wrong_dim.is_ok());
  EXPECT_EQ(wrong_dim.status().message(), "input 'x' dim 1: got 4, expected 3");
  auto wrong_type = evaluate_reference(graph, {{"x", i64({1, 3}, {1, 2, 3})}});
  ASSERT_FALSE(wrong_type.is_ok());
  EXPECT_EQ(wrong_type.status().code(), StatusCode::kInvalidArgument);
}

TEST(ReferenceInterpreter, UnsupportedOpsNameTheNode) {
  GraphBuilder g;
  ValueId x = g.input("x", DType::kF32, {2});
  g.output(g.op("NotAnOnnxOp", {x}, {}, "weird"));
  auto r = evaluate_reference(g.build(), {{"x", random_f32({2}, 4)}});
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(r.status().message().find("node 'weird' (NotAnOnnxOp)"), std::string::npos)
      << r.status().to_string();
}

TEST(ReferenceInterpreter, SupportDependsOnDomainAndOpset) {
  Node node;
  node.op_type = "HardSwish";
  node.opset = 14;
  EXPECT_TRUE(reference_supports(node));
  node.opset = 13;
  EXPECT_FALSE(reference_supports(node));
  node.op_type = "Upsample";
  node.opset = 9;
  EXPECT_TRUE(reference_supports(node));
  node.opset = 11;
  EXPECT_FALSE(reference_supports(node));
  node.op_type = "Conv";
  node.domain = "com.microsoft";
  EXPECT_FALSE(reference_supports(node));
  node.domain = "ai.onnx";
  EXPECT_TRUE(reference_supports(node));
}

TEST(ReferenceTensors, WideningIsExactAndNarrowingRoundsLikeCast) {
  Tensor half(DType::kF16, {2});
  half.data<f16>()[0] = f16::from_float(0.1f);
  half.data<f16>()[1] = f16::from_float(-65504.0f);
  RefTensor wide = ref_from_tensor(half);
  EXPECT_EQ(wide.floats[0], double(f16::from_float(0.1f).to_float()));
  EXPECT_EQ(wide.floats[1], -65504.0);
  RefTensor value = RefTensor::zeros(DType::kF32, {3});
  value.floats = {1.0 / 3, 1e300, -2.75};
  Tensor as_f32 = ref_to_tensor(value, DType::kF32);
  EXPECT_EQ(as_f32.data<float>()[0], 1.0f / 3);
  EXPECT_TRUE(std::isinf(as_f32.data<float>()[1]));
  Tensor as_i8 = ref_to_tensor(value, DType::kI8);
  EXPECT_EQ(as_i8.data<int8_t>()[2], -2);
  RefTensor ints = RefTensor::zeros(DType::kI64, {2});
  ints.ints = {300, -1};
  Tensor as_u8 = ref_to_tensor(ints, DType::kU8);
  EXPECT_EQ(as_u8.data<uint8_t>()[0], 44);
  EXPECT_EQ(as_u8.data<uint8_t>()[1], 255);
  Tensor as_bf16 = ref_to_tensor(value, DType::kBF16);
  EXPECT_EQ(as_bf16.data<bf16>()[2].to_float(), -2.75f);
}

}  // namespace
}  // namespace strider
