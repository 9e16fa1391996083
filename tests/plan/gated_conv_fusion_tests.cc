// Intent tests of passes/fuse_gated_conv.h on builder graphs: a gated stack's unit and a
// WaveNet layer (with its chomp) become one FusedGatedConv whose program reads the halves
// as registers 0 and 1; what must stay unfused does. The values are checked on CUDA
// (tests/cuda/cuda_mma_conv_tests.cc): only CUDA has a kernel for the node.
#include <gtest/gtest.h>

#include "ops/fused_elementwise.h"
#include "passes/fuse_elementwise.h"
#include "passes/fuse_gated_conv.h"
#include "passes/infer_shapes.h"
#include "../support/gated_unit.h"
#include "plan_test_util.h"

namespace strider {
namespace {

using testing::random_f32;

using testing_support::GatedUnit;

Graph unit_graph(const GatedUnit& u) {
  return testing_support::gated_unit_graph(u, DType::kF32, [](const Shape& s, uint32_t seed) { return random_f32(s, seed); });
}

// The graph after the passes a CUDA session runs before this one, then fuse_gated_convs.
Result<int> fuse(Graph& g, const std::function<bool(const GatedConvUnit&)>& pays = nullptr) {
  STRIDER_RETURN_IF_ERROR(infer_and_fold(g));
  STRIDER_RETURN_IF_ERROR(fuse_elementwise(g).status());
  STRIDER_RETURN_IF_ERROR(fuse_conv_activations(g).status());
  return fuse_gated_convs(g, pays);
}

const Node* gated_node(const Graph& g) {
  for (NodeId id = 0; id < g.num_nodes(); ++id)
    if (g.node(id).op_type == kFusedGatedConvOp) return &g.node(id);
  return nullptr;
}

TEST(GatedConvFusion, AGatedUnitBecomesOneNode) {
  for (bool split : {true, false}) {
    SCOPED_TRACE(split ? "Split" : "two Slices");
    GatedUnit u;
    u.split = split;
    Graph g = unit_graph(u);
    auto fused = fuse(g);
    ASSERT_TRUE(fused.is_ok()) << fused.status().to_string();
    EXPECT_EQ(*fused, 1);
    ASSERT_EQ(g.num_nodes(), 1);
    const Node* node = gated_node(g);
    ASSERT_NE(node, nullptr);
    EXPECT_EQ(*node->attributes.get_string("expression", ""), "Add(x2, Mul(Tanh(x0), Sigmoid(x1)))");
    EXPECT_EQ(g.value(node->outputs[0]).shape, (Shape{1, 8, 20}));
    ASSERT_EQ(node->inputs.size(), 4u);
    EXPECT_EQ(node->inputs[3], node->inputs[0]);  // the residual is the unit's input
    ASSERT_TRUE(infer_and_fold(g).is_ok());  // the schema agrees with the pass
  }
}

TEST(GatedConvFusion, TheChompBecomesLessEndPadding) {
  GatedUnit u;
  u.kernel = 2, u.dilation = 4, u.chomp = true, u.residual = false;
  Graph declined = unit_graph(u);  // the device is asked, with the unit's shape
  GatedConvUnit asked;
  auto none = fuse(declined, [&](const GatedConvUnit& unit) { return asked = unit, false; });
  ASSERT_TRUE(none.is_ok() && *none == 0);
  EXPECT_EQ(gated_node(declined), nullptr);
  EXPECT_EQ(asked.taps, 2);
  EXPECT_EQ(asked.in_channels, 8);
  EXPECT_EQ(asked.gated_channels, 8);
  EXPECT_EQ(asked.positions, 20);  // batch 1 x 20 steps, the chomped ones not counted
  Graph g = unit_graph(u);
  auto fused = fuse(g);
  ASSERT_TRUE(fused.is_ok()) << fused.status().to_string();
  EXPECT_EQ(*fused, 1);
  const Node* node = gated_node(g);
  ASSERT_NE(node, nullptr);
  EXPECT_EQ(*node->attributes.require_ints("pads"), (std::vector<int64_t>{4, 0}));
  EXPECT_EQ(g.value(node->outputs[0]).shape, (Shape{1, 8, 20}));
  EXPECT_EQ(*node->attributes.get_string("expression", ""), "Mul(Tanh(x0), Sigmoid(x1))");
}

TEST(GatedConvFusion, WhatMustStayUnfusedDoes) {
  GatedUnit read_twice;
  read_twice.halves_read_twice = true;  // a half is also a graph's other reader's input
  GatedUnit strided;
  strided.kernel = 2, strided.dilation = 2, strided.chomp = true, strided.stride = 2;  // chomp at stride 2
  strided.residual = false;
  for (const GatedUnit& u : {read_twice, strided}) {
    Graph g = unit_graph(u);
    auto fused = fuse(g);
    ASSERT_TRUE(fused.is_ok()) << fused.status().to_string();
    EXPECT_EQ(*fused, 0);
    EXPECT_EQ(gated_node(g), nullptr);
  }
}

}  // namespace
}  // namespace strider
