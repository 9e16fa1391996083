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

namespace strider {
namespace {

using namespace strider::testing;

struct BadCase {
  const char* op;
  std::vector<std::optional<Tensor>> inputs;
  AttributeMap attributes;
  int opset;
};

AttributeMap with_ints(const char* name, std::vector<int64_t> values, AttributeMap a = {}) {
  a.set_ints(name, std::move(values));
  return a;
}

TEST(ReferenceInterpreter, BadInputsAreStatusesNamingTheNodeNeverCrashes) {
  Tensor image = random_f32({1, 2, 4, 4}, 70);
  constexpr int64_t kHuge = int64_t(1) << 40;
  std::vector<BadCase> cases = {
      {"Conv", {image, random_f32({3, 2, 3}, 71)}, {}, 17},         // weight rank
      {"Conv", {image, random_f32({3, 2, 5, 5}, 72)}, {}, 17},      // kernel > input
      {"MaxPool", {image}, with_ints("kernel_shape", {9, 9}), 17},  // no output
      {"MaxPool", {image}, {}, 17},                                 // no kernel_shape
      {"AveragePool", {image}, with_ints("pads", {1, 1}, with_ints("kernel_shape", {2, 2})), 17},
      {"Resize", {image, std::nullopt, f32({4}, {1, 1, 2, 2}), i64({4}, {1, 2, 8, 8})}, {}, 13},
      {"Resize", {image, std::nullopt, f32({4}, {1, 1, 1e30f, 1})}, {}, 13},  // huge output
      {"Resize", {image, std::nullopt, f32({3}, {1, 1, 2})}, {}, 13},         // wrong length
      {"Expand", {image, i64({2}, {kHuge, kHuge})}, {}, 17},
      {"ConstantOfShape", {i64({2}, {kHuge, 3})}, {}, 17},
      {"ConstantOfShape", {i64({2}, {-1, 3})}, {}, 17},
      {"Range", {f32({}, {0}), f32({}, {1e30f}), f32({}, {1e-30f})}, {}, 17},
      {"Range", {i64({}, {0}), i64({}, {5}), i64({}, {0})}, {}, 17},
      {"Reshape", {image, i64({2}, {kHuge, kHuge})}, {}, 17},
      {"Slice", {image, i64({2}, {0, 0}), i64({1}, {1})}, {}, 17},
      {"Split", {image, i64({2}, {3, -1})}, {}, 17},
      {"Transpose", {image}, with_ints("perm", {0, 1, 2}), 17},
      {"Unsqueeze", {image, i64({2}, {1, 1})}, {}, 17},
      {"Gather", {image, i64({1}, {0})}, attrs({{"axis", 4}}), 17},
      {"Softmax", {image}, attrs({{"axis", 4}}), 17},
      {"ReduceSum", {image, i64({1}, {7})}, {}, 17},
      {"MatMul", {random_f32({2, 3}, 73), i64({3, 2}, {1, 2, 3, 4, 5, 6})}, {}, 17},
      {"Gemm", {random_f32({2, 3, 1}, 74), random_f32({3, 2}, 75)}, {}, 17},
      {"BatchNormalization",
       {image, f32({1}, {1}), f32({2}, {0, 0}), f32({2}, {0, 0}), f32({2}, {1, 1})},
       {},
       15},
      {"Where", {f32({1}, {1}), image, image}, {}, 17},
      {"Concat", {image, std::nullopt}, attrs({{"axis", 0}}), 17},
      {"Add", {image, std::nullopt}, {}, 17},
      {"Cast", {image}, {}, 17},  // no 'to'
  };
  for (BadCase& c : cases) {
    auto r = run_op(c.op, c.inputs, c.attributes, c.opset);
    ASSERT_FALSE(r.is_ok()) << c.op;
    EXPECT_NE(r.status().message().find(std::string("node 'the_node' (") + c.op + ")"),
              std::string::npos)
        << r.status().to_string();
  }
}

}  // namespace
}  // namespace strider
