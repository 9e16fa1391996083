// Intent tests of the attention fusion pass (passes/fuse_attention.h) on builder graphs: the
// patterns it folds into FusedAttention, with the score program it writes, and the ones it
// must leave alone because a value inside would be lost or the fused node would compute
// something else. The fused kernels' numbers are the kernel suite's (tests/kernels).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "ir/builder.h"
#include "ops/fused_attention.h"
#include "passes/fuse_attention.h"
#include "passes/infer_shapes.h"

namespace strider {
namespace {

Tensor scalar(float v) { return Tensor::from_values<float>(DType::kF32, {}, std::vector<float>{v}); }

struct Built {
  Graph graph;
  int fused = 0;
  std::string expression;
};

// q [2, 3, 5, 4] @ kt [2, 3, 4, 6] -> `middle` -> @ v [2, 3, 6, 4], inferred, then fused.
Built fuse(const std::function<ValueId(GraphBuilder&, ValueId)>& middle, DType t = DType::kF32,
           bool scores_out = false, const std::function<bool(const AttentionShape&)>& wanted = {}) {
  GraphBuilder b(17);
  ValueId s = b.op("MatMul", {b.input("q", t, {2, 3, 5, 4}), b.input("kt", t, {2, 3, 4, 6})});
  if (scores_out) b.output(s);
  b.output(b.op("MatMul", {middle(b, s), b.input("v", t, {2, 3, 6, 4})}));
  Built built{b.build()};
  EXPECT_TRUE(infer_and_fold(built.graph).is_ok());
  Result<int> n = fuse_attention(built.graph, wanted);
  EXPECT_TRUE(n.is_ok()) << n.status().to_string();
  built.fused = n.is_ok() ? *n : -1;
  for (NodeId id = 0; id < built.graph.num_nodes(); ++id)
    if (built.graph.node(id).op_type == kFusedAttentionOp)
      built.expression = *built.graph.node(id).attributes.get_string("expression", "");
  return built;
}

ValueId softmax(GraphBuilder& b, ValueId x, int64_t axis = -1) { return b.op("Softmax", {x}, int_attribute("axis", axis)); }

TEST(AttentionFusion, FoldsScaleMaskSoftmaxIntoOneNode) {
  Built f = fuse([](GraphBuilder& b, ValueId s) {
    ValueId scaled = b.op("Div", {s, b.constant("d", scalar(2.0f))});
    return softmax(b, b.op("Add", {b.input("mask", DType::kF32, {2, 1, 1, 6}), scaled}));
  });
  EXPECT_EQ(f.fused, 1);
  EXPECT_EQ(f.graph.num_nodes(), 1);
  EXPECT_EQ(f.expression, "softmax(((q @ kt) / 2) + x3) @ v");
}

// A device that weighs sizes (CUDA fuses only where its tiled kernel fills the GPU) is
// asked with the match's sizes, and a match it declines stays as it was.
TEST(AttentionFusion, AsksTheDeviceAboutEachMatchsSizes) {
  auto scaled_softmax = [](GraphBuilder& b, ValueId s) { return softmax(b, b.op("Div", {s, b.constant("d", scalar(2.0f))})); };
  std::vector<AttentionShape> asked;
  Built declined = fuse(scaled_softmax, DType::kF32, false, [&](const AttentionShape& shape) {
    asked.push_back(shape);
    return false;
  });
  EXPECT_EQ(declined.fused, 0);
  EXPECT_EQ(declined.graph.num_nodes(), 4);
  ASSERT_EQ(asked.size(), 1u);
  EXPECT_EQ(asked[0].dtype, DType::kF32);
  EXPECT_EQ(asked[0].batch, 6);
  EXPECT_EQ(asked[0].q_len, 5);
  EXPECT_EQ(asked[0].keys, 6);
  EXPECT_EQ(asked[0].head, 4);
  EXPECT_EQ(asked[0].v_head, 4);
  Built accepted = fuse(scaled_softmax, DType::kF32, false, [](const AttentionShape& shape) { return shape.batch == 6; });
  EXPECT_EQ(accepted.fused, 1);
}

TEST(AttentionFusion, FoldsMaskedFillAndTheNanGuard) {
  Built f = fuse([](GraphBuilder& b, ValueId s) {
    ValueId cond = b.input("cond", DType::kBool, {5, 6});
    ValueId filled = b.op("Where", {cond, b.constant("fill", scalar(-INFINITY)), b.op("Mul", {s, b.constant("c", scalar(0.5f))})});
    ValueId p = softmax(b, filled);
    return b.op("Where", {b.op("IsNaN", {p}), b.constant("zero", scalar(0.0f)), p});
  });
  EXPECT_EQ(f.fused, 1);
  EXPECT_EQ(f.expression, "softmax(where(x3, -inf, (q @ kt) * 0.5)) (undefined rows 0) @ v");
}

TEST(AttentionFusion, LeavesPatternsItWouldChange) {
  // The scores are also a graph output: fusing would lose them.
  EXPECT_EQ(fuse([](GraphBuilder& b, ValueId s) { return softmax(b, s); }, DType::kF32, true).fused, 0);
  // A softmax over the queries, not the keys.
  EXPECT_EQ(fuse([](GraphBuilder& b, ValueId s) { return softmax(b, s, -2); }).fused, 0);
  // A scale that is not a scalar constant.
  EXPECT_EQ(fuse([](GraphBuilder& b, ValueId s) { return softmax(b, b.op("Mul", {s, b.input("c", DType::kF32, {6})})); }).fused, 0);
  // A bias that broadcasts the scores to a larger shape.
  EXPECT_EQ(fuse([](GraphBuilder& b, ValueId s) {
              return softmax(b, b.op("Add", {s, b.input("bias", DType::kF32, {4, 2, 3, 5, 6})}));
            }).fused, 0);
  // The scores added to themselves: the bias would be a value the fusion removes.
  EXPECT_EQ(fuse([](GraphBuilder& b, ValueId s) { return softmax(b, b.op("Add", {s, s})); }).fused, 0);
  // f64 (the fused kernel computes in f32).
  EXPECT_EQ(fuse([](GraphBuilder& b, ValueId s) { return softmax(b, s); }, DType::kF64).fused, 0);
}

TEST(AttentionFusion, LeavesProbabilitiesReadTwice) {
  GraphBuilder b(17);
  ValueId p = softmax(b, b.op("MatMul", {b.input("q", DType::kF32, {3, 5, 4}), b.input("kt", DType::kF32, {3, 4, 6})}));
  b.output(b.op("MatMul", {p, b.input("v", DType::kF32, {3, 6, 4})}));
  b.output(b.op("ReduceSum", {p}));
  Graph g = b.build();
  ASSERT_TRUE(infer_and_fold(g).is_ok());
  EXPECT_EQ(*fuse_attention(g), 0);
}

}  // namespace
}  // namespace strider
