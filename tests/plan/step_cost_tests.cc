// exec/step_cost.h: what a profile divides by a step's time. The FLOPs of a grouped,
// strided convolution, a batched MatMul, a transposed Gemm; bytes of every operand once.
#include <gtest/gtest.h>

#include "exec/step_cost.h"
#include "ir/builder.h"
#include "plan_test_util.h"

namespace strider {
namespace {

const Node& only_node_of(const testing::PlannedGraph& p, std::string_view op) {
  for (NodeId id = 0; id < p.graph->num_nodes(); ++id)
    if (p.graph->node(id).op_type == op) return p.graph->node(id);
  ADD_FAILURE() << "no " << op;
  return p.graph->node(0);
}

TEST(StepCost, ConvolutionsAndProductsCountMultiplyAddsTwice) {
  GraphBuilder b;
  AttributeMap attrs = ints_attribute("strides", {2, 2});
  attrs.set_int("group", 2);
  attrs.set_ints("pads", {1, 1, 1, 1});
  // x [2, 4, 9, 9], w [6, 2, 3, 3] (group 2) -> y [2, 6, 5, 5]; each output 2*3*3 MACs.
  b.output(b.op("Conv", {b.input("x", DType::kF32, {2, 4, 9, 9}), b.input("w", DType::kF32, {6, 2, 3, 3})}, attrs));
  auto conv = testing::plan_graph(b.build());
  ASSERT_NE(conv.plan, nullptr);
  StepCost c = step_cost(*conv.plan, only_node_of(conv, "Conv"));
  EXPECT_DOUBLE_EQ(c.flops, 2.0 * (2 * 6 * 5 * 5) * (2 * 3 * 3));
  EXPECT_EQ(c.bytes, 4 * (2 * 4 * 9 * 9 + 6 * 2 * 3 * 3 + 2 * 6 * 5 * 5));

  GraphBuilder m;  // [3, 4, 5] x [5, 7] -> [3, 4, 7]: K = 5
  m.output(m.op("MatMul", {m.input("a", DType::kF32, {3, 4, 5}), m.input("b", DType::kF32, {5, 7})}));
  auto matmul = testing::plan_graph(m.build());
  ASSERT_NE(matmul.plan, nullptr);
  EXPECT_DOUBLE_EQ(step_cost(*matmul.plan, only_node_of(matmul, "MatMul")).flops, 2.0 * (3 * 4 * 7) * 5);

  GraphBuilder g;  // transA: a [5, 4] is A^T, so K = 5; y [4, 6]
  g.output(g.op("Gemm", {g.input("a", DType::kF32, {5, 4}), g.input("b", DType::kF32, {5, 6})},
                int_attribute("transA", 1)));
  auto gemm = testing::plan_graph(g.build());
  ASSERT_NE(gemm.plan, nullptr);
  EXPECT_DOUBLE_EQ(step_cost(*gemm.plan, only_node_of(gemm, "Gemm")).flops, 2.0 * (4 * 6) * 5);

  GraphBuilder r;  // no arithmetic counted: bytes only
  r.output(r.op("Relu", {r.input("x", DType::kBF16, {3, 5})}));
  auto relu = testing::plan_graph(r.build());
  ASSERT_NE(relu.plan, nullptr);
  StepCost rc = step_cost(*relu.plan, only_node_of(relu, "Relu"));
  EXPECT_EQ(rc.flops, 0);
  EXPECT_EQ(rc.bytes, 2 * 2 * 15);
}

}  // namespace
}  // namespace strider
