// The kernel suite's FusedMapGroup (ops/fused_map_group.h): independent fused programs of
// different shapes, made by fuse_elementwise and group_small_maps from the unfused ops and
// checked against the float64 reference of those ops, on every device and view layout of
// the catalog. On CUDA the members run in one launch (map_group.cu): the compiled forms
// (the rotary halves, the SiLU gate) and the interpreter, each member picked per block.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "ir/builder.h"
#include "kernel_harness.h"
#include "kernel_suite.h"
#include "ops/fused_map_group.h"
#include "passes/fuse_elementwise.h"
#include "passes/group_maps.h"
#include "passes/infer_shapes.h"

namespace strider {
namespace {

using kernel_test::KernelSuite;

// The members, each of its own shape: q1 * c1 - q2 * s1 and q2 * c2 + q1 * s2 over q's
// halves with the tables broadcast over the heads (Llama's rotary halves); SiLU(g) * u
// (Llama's gate); and tanh(a * b) + a, which no compiled form describes.
Graph unfused_members(DType t, int members) {
  GraphBuilder b(17);
  const Shape q = {2, 3, 5, 4}, table = {5, 4};
  ValueId q1 = b.input("q1", t, q), q2 = b.input("q2", t, q);
  auto product = [&](ValueId x, const char* table_name) { return b.op("Mul", {x, b.input(table_name, t, table)}); };
  b.output(b.op("Sub", {product(q1, "c1"), product(q2, "s1")}));
  b.output(b.op("Add", {product(q2, "c2"), product(q1, "s2")}));
  if (members > 2) {
    ValueId g = b.input("g", t, {7, 9});
    b.output(b.op("Mul", {b.op("Mul", {g, b.op("Sigmoid", {g})}), b.input("u", t, {7, 9})}));
  }
  if (members > 3) {
    ValueId a = b.input("a", t, {1, 6, 1, 33});
    b.output(b.op("Add", {b.op("Tanh", {b.op("Mul", {a, b.input("b", t, {1, 6, 1, 33})})}), a}));
  }
  return b.build();
}

TEST_P(KernelSuite, IndependentMapsInOneGroup) {
  for (DType t : {DType::kF32, DType::kBF16})
    for (int members : {2, 4}) {
      SCOPED_TRACE(fmt::format("{}, {} members", dtype_name(t), members));
      Graph unfused = unfused_members(t, members);
      ASSERT_TRUE(infer_and_fold(unfused).is_ok());
      Graph fused = unfused;
      ASSERT_TRUE(fuse_elementwise(fused).is_ok());
      Result<int> groups = group_small_maps(fused, kGroupedMapElements);
      ASSERT_TRUE(groups.is_ok()) << groups.status().to_string();
      ASSERT_EQ(*groups, 1);
      ASSERT_EQ(fused.num_nodes(), 1);
      ASSERT_EQ(fused.node(0).op_type, kFusedMapGroupOp);
      std::map<std::string, Tensor> inputs;
      uint32_t seed = 3;
      for (ValueId v : unfused.inputs())
        inputs[unfused.value(v).name] = random_tensor(t, unfused.value(v).shape, seed++);
      check_graph(std::move(fused), inputs, &unfused);
      const std::string& kernel = kernel_test::last_implementation();
      if (on_cuda() && !kernel.empty()) {
        EXPECT_NE(kernel.find(fmt::format("map group of {}", members)), std::string::npos) << kernel;
      }
    }
}

}  // namespace
}  // namespace strider
