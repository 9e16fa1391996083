// Intent tests of group_small_maps (passes/group_maps.h) on builder graphs: which fused
// maps share one FusedMapGroup, what ends a group, where the group and the nodes it
// delays go. The members' arithmetic is the kernel suite's (IndependentMapsInOneGroup).
#include <gtest/gtest.h>

#include <climits>
#include <string>
#include <vector>

#include "ir/builder.h"
#include "ops/fused_map_group.h"
#include "passes/fuse_elementwise.h"
#include "passes/group_maps.h"
#include "passes/infer_shapes.h"
#include "passes/split_rotary.h"

namespace strider {
namespace {

// The nodes' op types in order, and every node's inputs defined before it.
std::vector<std::string> ops_in_order(const Graph& g) {
  std::vector<std::string> ops;
  for (NodeId id = 0; id < g.num_nodes(); ++id) {
    for (ValueId v : g.node(id).inputs) {
      if (v != kNoValue && g.value(v).producer != kNoNode) {
        EXPECT_LT(g.value(v).producer, id) << g.node(id).name;
      }
    }
    ops.push_back(g.node(id).op_type);
  }
  return ops;
}

// x * cos + rotate_half(x) * sin over x's last axis (8 wide), as torch exports Llama's.
ValueId rotary(GraphBuilder& b, ValueId x, ValueId cos, ValueId sin, const std::string& tag) {
  auto slice = [&](int64_t start, int64_t end, const std::string& name) {
    return b.op("Slice", {x, b.constant(tag + name + "_s", i64_tensor({start})), b.constant(tag + name + "_e", i64_tensor({end})),
                          b.constant(tag + name + "_a", i64_tensor({-1}))});
  };
  ValueId rotated = b.op("Concat", {b.op("Neg", {slice(4, INT64_MAX, "high")}), slice(0, 4, "low")}, int_attribute("axis", -1));
  return b.op("Add", {b.op("Mul", {x, cos}), b.op("Mul", {rotated, sin})});
}

Result<int> fuse_and_group(Graph& g, int64_t max_elements = kGroupedMapElements) {
  STRIDER_RETURN_IF_ERROR(infer_and_fold(g));
  STRIDER_RETURN_IF_ERROR(split_rotate_half(g).status());
  STRIDER_RETURN_IF_ERROR(fuse_elementwise(g).status());
  return group_small_maps(g, max_elements);
}

// Llama's attention input: q's halves, their Concat, k's halves (which read slices made
// after that Concat), k's Concat, then the product that reads both. The first Concat waits
// for the group, so all four halves are one launch, before both Concats.
TEST(MapGroups, BothRotaryTensorsHalvesAreOneGroup) {
  GraphBuilder b;
  ValueId cos = b.input("cos", DType::kF32, {6, 8}), sin = b.input("sin", DType::kF32, {6, 8});
  ValueId q = rotary(b, b.input("q", DType::kF32, {1, 4, 6, 8}), cos, sin, "q");
  ValueId k = rotary(b, b.input("k", DType::kF32, {1, 4, 6, 8}), cos, sin, "k");
  b.output(b.op("MatMul", {q, b.op("Transpose", {k}, ints_attribute("perm", {0, 1, 3, 2}))}));
  Graph g = b.build();
  Result<int> groups = fuse_and_group(g);
  ASSERT_TRUE(groups.is_ok()) << groups.status().to_string();
  EXPECT_EQ(*groups, 1);
  std::vector<std::string> ops = ops_in_order(g);
  auto group = std::find(ops.begin(), ops.end(), std::string(kFusedMapGroupOp));
  ASSERT_NE(group, ops.end());
  EXPECT_EQ(std::count(ops.begin(), ops.end(), std::string(kFusedElementwiseOp)), 0);
  EXPECT_EQ(std::count(group, ops.end(), std::string("Concat")), 2);  // both after the group
  const Node& node = g.node(NodeId(group - ops.begin()));
  EXPECT_EQ(node.outputs.size(), 4u);
  EXPECT_EQ(node.inputs.size(), 16u);
  Result<std::vector<Node>> members = map_group_members(node);
  ASSERT_TRUE(members.is_ok()) << members.status().to_string();
  EXPECT_EQ(*members->at(0).attributes.get_string("expression", ""), "Sub(Mul(x0, x1), Mul(x2, x3))");
  EXPECT_EQ(*members->at(1).attributes.get_string("expression", ""), "Add(Mul(x0, x1), Mul(x2, x3))");
}

// A product that reads a map cannot wait for later maps: the group ends before it (a group
// of one stays a FusedElementwise), and the maps after it form their own.
TEST(MapGroups, AReaderThatCannotWaitEndsTheGroup) {
  GraphBuilder b;
  auto map = [&](const std::string& name) {
    ValueId x = b.input(name, DType::kF32, {4, 4});
    return b.op("Sigmoid", {b.op("Mul", {x, x})});
  };
  ValueId first = map("a");
  ValueId product = b.op("MatMul", {first, b.input("w", DType::kF32, {4, 4})});
  b.output(product);
  b.output(map("c"));
  b.output(map("d"));
  Graph g = b.build();
  Result<int> groups = fuse_and_group(g);
  ASSERT_TRUE(groups.is_ok()) << groups.status().to_string();
  EXPECT_EQ(*groups, 1);
  EXPECT_EQ(ops_in_order(g), (std::vector<std::string>{"FusedElementwise", "MatMul", "FusedMapGroup"}));
}

// At most four members; members of one dtype; none over the size limit.
TEST(MapGroups, SizeDtypeAndMemberLimits) {
  GraphBuilder b;
  auto map = [&](const std::string& name, DType t, Shape shape) {
    ValueId x = b.input(name, t, std::move(shape));
    b.output(b.op("Tanh", {b.op("Add", {x, x})}));
  };
  for (const char* name : {"a", "b", "c", "d", "e"}) map(name, DType::kF32, {8, 8});
  map("big", DType::kF32, {64, 64});  // over the limit below: alone, and it ends nothing
  map("f", DType::kF32, {8, 8});
  map("h1", DType::kF16, {8, 8});
  map("h2", DType::kF16, {8, 8});
  Graph g = b.build();
  Result<int> groups = fuse_and_group(g, 1000);
  ASSERT_TRUE(groups.is_ok()) << groups.status().to_string();
  EXPECT_EQ(*groups, 3);
  EXPECT_EQ(ops_in_order(g), (std::vector<std::string>{"FusedMapGroup", "FusedElementwise", "FusedMapGroup",
                                                       "FusedMapGroup"}));
  EXPECT_EQ(g.node(0).outputs.size(), 4u);
  EXPECT_EQ(g.node(2).outputs.size(), 2u);  // e and f, with "big" between them left in place
  EXPECT_EQ(g.node(3).outputs.size(), 2u);
  Graph none = b.build();
  Result<int> off = fuse_and_group(none, 0);
  ASSERT_TRUE(off.is_ok());
  EXPECT_EQ(*off, 0);
}

// A group whose attributes do not add up is refused by name, not indexed past its inputs.
TEST(MapGroups, AMalformedGroupIsRefusedWithItsNode) {
  GraphBuilder b;
  ValueId x = b.input("x", DType::kF32, {4});
  b.output(b.op("Tanh", {b.op("Add", {x, x})}));
  b.output(b.op("Sigmoid", {b.op("Mul", {x, x})}));
  Graph g = b.build();
  ASSERT_TRUE(fuse_and_group(g).is_ok());
  ASSERT_EQ(g.node(0).op_type, kFusedMapGroupOp);
  Node broken = g.node(0);
  broken.attributes.set_ints("member_inputs", {1, 3});
  Result<std::vector<Node>> members = map_group_members(broken);
  ASSERT_FALSE(members.is_ok());
  EXPECT_NE(members.status().message().find(broken.name), std::string::npos) << members.status().to_string();
}

}  // namespace
}  // namespace strider
