// Intent tests of passes/fuse_gated_stack.h on builder graphs: a chain of gated residual
// units of one tap becomes one FusedGatedStack; a unit whose output something else reads
// ends a stack; a unit without the residual, a two-tap unit, or one the device declines
// stays out. The values are checked on every device by the kernel suite
// (tests/kernels/gated_conv_suite_tests.cc).
#include <gtest/gtest.h>

#include "ops/fused_elementwise.h"
#include "ops/gated_stack.h"
#include "passes/fuse_elementwise.h"
#include "passes/fuse_gated_conv.h"
#include "passes/fuse_gated_stack.h"
#include "passes/infer_shapes.h"
#include "../support/gated_unit.h"
#include "plan_test_util.h"

namespace strider {
namespace {

using testing::random_f32;
using testing_support::GatedUnit;

Graph stack_graph(const GatedUnit& u, int units, int tap_after = -1, int no_residual = -1) {
  return testing_support::gated_stack_graph(
      u, units, DType::kF32, [](const Shape& s, uint32_t seed) { return random_f32(s, seed); }, tap_after, no_residual);
}

// The passes a CUDA session runs, every unit fused as FusedGatedConv first; the stacks
// the device accepts (`pays`), then the schema's check of the result.
Result<int> fuse_stacks(Graph& g, const std::function<bool(const GatedConvUnit&)>& pays = nullptr) {
  STRIDER_RETURN_IF_ERROR(infer_and_fold(g));
  STRIDER_RETURN_IF_ERROR(fuse_elementwise(g).status());
  STRIDER_RETURN_IF_ERROR(fuse_conv_activations(g).status());
  STRIDER_RETURN_IF_ERROR(fuse_gated_convs(g).status());
  STRIDER_ASSIGN_OR_RETURN(int stacks, fuse_gated_stacks(g, pays));
  STRIDER_RETURN_IF_ERROR(infer_and_fold(g));
  return stacks;
}

// The op types of g's nodes in order, and each stack's unit count: "S4 R" for a stack of
// four units then a Relu.
std::string stack_summary(const Graph& g) {
  std::string out;
  for (NodeId id = 0; id < g.num_nodes(); ++id) {
    const Node& n = g.node(id);
    if (!out.empty()) out += " ";
    if (n.op_type == kFusedGatedStackOp) out += "S" + std::to_string(gated_stack_units(n));
    else if (n.op_type == kFusedGatedConvOp) out += "G";
    else if (n.op_type == "Relu") out += "R";
    else out += n.op_type;
  }
  return out;
}

TEST(GatedStackFusion, AChainOfUnitsBecomesOneNode) {
  GatedUnit u;
  u.x = {2, 16, 10};
  Graph g = stack_graph(u, 4);
  const ValueId x = g.inputs()[0], y = g.outputs()[0];
  auto stacks = fuse_stacks(g);
  ASSERT_TRUE(stacks.is_ok()) << stacks.status().to_string();
  EXPECT_EQ(*stacks, 1);
  ASSERT_EQ(stack_summary(g), "S4");
  const Node& stack = g.node(0);
  ASSERT_EQ(stack.inputs.size(), 9u);
  EXPECT_EQ(stack.inputs[0], x);
  EXPECT_EQ(stack.outputs[0], y);
  for (size_t i = 1; i < 9; ++i) EXPECT_TRUE(g.value(stack.inputs[i]).is_constant()) << "input " << i;
  EXPECT_EQ(g.value(stack.inputs[1]).shape, (Shape{32, 16, 1}));
  EXPECT_EQ(g.value(stack.inputs[2]).shape, (Shape{32}));
  EXPECT_EQ(g.value(y).shape, (Shape{2, 16, 10}));
}

TEST(GatedStackFusion, AUnitReadElsewhereEndsAStack) {
  GatedUnit u;
  Graph g = stack_graph(u, 4, /*tap_after=*/1);
  auto stacks = fuse_stacks(g);
  ASSERT_TRUE(stacks.is_ok()) << stacks.status().to_string();
  EXPECT_EQ(*stacks, 2);
  EXPECT_EQ(stack_summary(g), "S2 R S2");
}

TEST(GatedStackFusion, AUnitWithoutTheResidualStaysOut) {
  GatedUnit u;
  Graph g = stack_graph(u, 4, -1, /*no_residual=*/2);
  auto stacks = fuse_stacks(g);
  ASSERT_TRUE(stacks.is_ok()) << stacks.status().to_string();
  EXPECT_EQ(*stacks, 2);
  EXPECT_EQ(stack_summary(g), "S2 G S1");
}

TEST(GatedStackFusion, TwoTapUnitsAndDeclinedUnitsStayOut) {
  GatedUnit two_taps;
  two_taps.kernel = 2, two_taps.dilation = 1, two_taps.chomp = true;
  Graph g = stack_graph(two_taps, 3);
  auto stacks = fuse_stacks(g);
  ASSERT_TRUE(stacks.is_ok()) << stacks.status().to_string();
  EXPECT_EQ(*stacks, 0);
  EXPECT_EQ(stack_summary(g), "G G G");

  GatedUnit batch3;
  batch3.x = {3, 8, 20};
  Graph declined = stack_graph(batch3, 3);
  std::vector<int64_t> positions;  // what the device is asked with, a unit each
  stacks = fuse_stacks(declined, [&](const GatedConvUnit& unit) { return positions.push_back(unit.positions), unit.in_channels > 8; });
  EXPECT_EQ(positions, std::vector<int64_t>(3, 60));  // 3 images x 20 steps
  ASSERT_TRUE(stacks.is_ok()) << stacks.status().to_string();
  EXPECT_EQ(*stacks, 0);
  EXPECT_EQ(stack_summary(declined), "G G G");
}

}  // namespace
}  // namespace strider
