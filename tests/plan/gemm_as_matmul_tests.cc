// Intent tests of passes/gemm_as_matmul.h: a Gemm that is a Linear layer read by one
// elementwise node becomes a product with that node as its epilogue (one kernel where there
// were two), computing what the Gemm and its reader computed (against the float64
// reference of the graph as built, f32 and bf16); every other Gemm stays a Gemm.
#include <gtest/gtest.h>

#include <algorithm>

#include "passes/gemm_as_matmul.h"
#include "plan_test_util.h"

namespace strider {
namespace {
using testing::random_f32;

struct Linear {
  float alpha = 1, beta = 1;
  int64_t trans_a = 0, trans_b = 1;
  bool bias = true;
  const char* reader = "Tanh";  // nullptr: the Gemm's output is the graph's
};

// y = reader(Gemm(Neg(x), W, b)) with x [3, 16] and 8 outputs (W [8, 16] for transB = 1).
Graph linear_graph(const Linear& l) {
  GraphBuilder b(17);
  ValueId x = b.op("Neg", {b.input("x", DType::kF32, {3, 16})}, {}, "neg");
  if (l.trans_a) x = b.op("Transpose", {x}, ints_attribute("perm", {1, 0}), "xt");
  ValueId w = b.constant("w", l.trans_b ? random_f32({8, 16}, 11) : random_f32({16, 8}, 11));
  std::vector<ValueId> inputs = {x, w};
  if (l.bias) inputs.push_back(b.constant("b", random_f32({8}, 12)));
  AttributeMap attributes;
  attributes.set_float("alpha", l.alpha);
  attributes.set_float("beta", l.beta);
  attributes.set_int("transA", l.trans_a);
  attributes.set_int("transB", l.trans_b);
  ValueId y = b.op("Gemm", inputs, attributes, "linear");
  b.output(l.reader ? b.op(l.reader, {y}, {}, "act") : y);
  return b.build();
}

std::vector<std::string> kernel_ops(const testing::PlannedGraph& p) {
  std::vector<std::string> ops;
  for (const PlanStep& step : p.plan->steps)
    if (step.kind == StepKind::kKernel) ops.push_back(p.graph->node(step.node).op_type);
  return ops;
}

// Plans `built` in a CPU session (after gemm_as_matmul where `rewrite`: the CPU device does
// not rewrite, Device::rewrites_linear_gemms; cuda and sim do), runs it on seeded inputs
// against the float64 reference of `built`, and returns the op types of the steps that run
// kernels.
std::vector<std::string> run_against_reference(const Graph& built, DType dtype, bool rewrite = true) {
  SessionOptions options;
  options.dtype = dtype;
  options.poison_memory = true;
  Graph planned = built;
  if (rewrite) {
    EXPECT_TRUE(infer_and_fold(planned).is_ok());
    auto rewritten = gemm_as_matmul(planned);
    EXPECT_TRUE(rewritten.is_ok()) << rewritten.status().to_string();
  }
  auto p = testing::plan_in_session(planned, testing::verified(), options);
  if (!p.session) {
    ADD_FAILURE() << "no session";
    return {};
  }
  Tensor input = random_f32({3, 16}, 7);
  Tensor seen = dtype == DType::kBF16 ? *convert_float_tensor(*convert_float_tensor(input, DType::kBF16), DType::kF32) : input;
  auto outputs = p.session->run({input});
  EXPECT_TRUE(outputs.is_ok()) << outputs.status().to_string();
  auto expected = evaluate_reference(built, {{"x", seen}});
  EXPECT_TRUE(expected.is_ok()) << expected.status().to_string();
  if (outputs.is_ok() && expected.is_ok()) testing::expect_outputs_near(*outputs, expected->outputs, default_tolerance(dtype));
  return kernel_ops(p);
}

TEST(GemmAsMatMul, LinearAndItsActivationAreOneProduct) {
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    for (int64_t trans_b : {0, 1}) {
      for (bool bias : {true, false}) {
        SCOPED_TRACE(::testing::Message() << dtype_name(dtype) << " transB " << trans_b << " bias " << bias);
        Linear l;
        l.trans_b = trans_b;
        l.bias = bias;
        l.reader = bias ? "Tanh" : "Relu";
        std::vector<std::string> ops = run_against_reference(linear_graph(l), dtype);
        EXPECT_EQ(std::count(ops.begin(), ops.end(), std::string(kFusedMatMulOp)), 1);
        EXPECT_EQ(std::count(ops.begin(), ops.end(), std::string("Gemm")), 0);
        EXPECT_EQ(std::count(ops.begin(), ops.end(), std::string(l.reader)), 0);
      }
    }
  }
}

// A Gemm the pass must not take: scaled, A transposed, or with no elementwise reader.
TEST(GemmAsMatMul, OtherGemmsStayGemms) {
  Linear scaled, transposed_a, no_reader, scaled_bias;
  scaled.alpha = 0.5f;
  scaled_bias.beta = 2.0f;
  transposed_a.trans_a = 1;
  no_reader.reader = nullptr;
  for (const Linear& l : {scaled, scaled_bias, transposed_a, no_reader}) {
    Graph g = linear_graph(l);
    ASSERT_TRUE(infer_and_fold(g).is_ok());
    auto rewritten = gemm_as_matmul(g);
    ASSERT_TRUE(rewritten.is_ok()) << rewritten.status().to_string();
    EXPECT_EQ(*rewritten, 0) << "alpha " << l.alpha << " beta " << l.beta << " transA " << l.trans_a;
  }
  // The scaled one still computes its Gemm, with its activation after it.
  std::vector<std::string> ops = run_against_reference(linear_graph(scaled), DType::kF32);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), std::string("Gemm")), 1);
}

// The CPU session leaves a Linear Gemm as it is: its Gemm kernels pack the constant weights
// (the row product for one row), which B's transposed view would hide from a MatMul.
TEST(GemmAsMatMul, TheCpuSessionKeepsItsGemm) {
  std::vector<std::string> ops = run_against_reference(linear_graph(Linear{}), DType::kF32, /*rewrite=*/false);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), std::string("Gemm")), 1);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), std::string(kFusedMatMulOp)), 0);
}

}  // namespace
}  // namespace strider
