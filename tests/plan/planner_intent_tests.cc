// Intent tests of the planner on small builder graphs: what is a view, what is written in
// place into a concat, what reuses whose memory (after ONNX Runtime's planner tests).
#include <gtest/gtest.h>

#include "plan/verify.h"
#include "plan_test_util.h"

namespace strider {
namespace {
using testing::int_attribute;
using testing::plan_graph;
using testing::random_f32;
using testing::verified;


PlanOptions nchw() {
  PlanOptions o = verified();
  o.layout = LayoutChoice::kNchw;
  return o;
}

TEST(PlannerIntent, SplitOutputsAreViewsWithOffsets) {
  GraphBuilder b;
  ValueId x = b.op("Relu", {b.input("x", DType::kF32, {12, 16})}, {}, "relu");
  auto halves = b.ops("Split", {x, b.constant("sizes", i64_tensor({8, 8}))}, 2, int_attribute("axis", 1), "split");
  b.output(b.op("Add", {halves[0], halves[1]}, {}, "add"));
  auto p = plan_graph(b.build(), nchw());
  EXPECT_EQ(p.value("split:0").role, ValueRole::kView);
  EXPECT_EQ(p.value("split:1").role, ValueRole::kView);
  EXPECT_EQ(p.alias_name("split:1"), "relu:0");
  // The second half starts 8 elements into the Relu output's bytes, with its row stride.
  EXPECT_EQ(p.value("split:1").view.byte_offset - p.value("relu:0").view.byte_offset, 8 * 4);
  EXPECT_EQ(p.value("split:1").view.strides, (Strides{16, 1}));
  EXPECT_EQ(p.step("split").kind, StepKind::kView);
  EXPECT_EQ(p.plan->stats.copies, 0);
}

// Relu 'a' and Sigmoid 'b' of one input, concatenated over channels, then pooled.
Graph concat_of_two_parts() {
  GraphBuilder b;
  ValueId x = b.input("x", DType::kF32, {2, 3, 4, 5});
  ValueId a = b.op("Relu", {x}, {}, "a");
  ValueId c = b.op("Sigmoid", {x}, {}, "b");
  ValueId cat = b.op("Concat", {a, c}, int_attribute("axis", 1), "cat");
  b.output(b.op("MaxPool", {cat}, ints_attribute("kernel_shape", {1, 1}), "out"));  // makes them images
  return b.build();
}

TEST(PlannerIntent, ConcatPartsAreWrittenInPlace) {
  const Graph graph = concat_of_two_parts();
  for (LayoutChoice layout : {LayoutChoice::kNchw, LayoutChoice::kNhwc}) {
    PlanOptions options = verified();
    options.layout = layout;
    auto p = plan_graph(graph, options);
    EXPECT_EQ(p.value("a:0").role, ValueRole::kConcatPart);
    EXPECT_EQ(p.value("b:0").role, ValueRole::kConcatPart);
    EXPECT_EQ(p.step("cat").kind, StepKind::kView);
    // b's slice starts 3 channels in: 3 * 20 elements (nchw) or 3 elements (nhwc) after a's.
    int64_t shift = layout == LayoutChoice::kNchw ? 3 * 20 : 3;
    EXPECT_EQ(p.value("b:0").view.byte_offset - p.value("a:0").view.byte_offset, shift * 4);
    EXPECT_EQ(p.plan->stats.copies, 0);
  }
}

TEST(PlannerIntent, TheSameValueTwiceInAConcatIsCopiedTheSecondTime) {
  GraphBuilder b;
  ValueId a = b.op("Relu", {b.input("x", DType::kF32, {4, 6})}, {}, "a");
  b.output(b.op("Concat", {a, a}, int_attribute("axis", 1), "cat"));
  auto p = plan_graph(b.build(), nchw());
  EXPECT_EQ(p.step("cat").kind, StepKind::kKernel);
  EXPECT_EQ(p.plan->stats.copies, 1);
}

TEST(PlannerIntent, ConcatOfConcatsNests) {
  GraphBuilder b;
  ValueId x = b.input("x", DType::kF32, {2, 4, 3});
  ValueId inner = b.op("Concat", {b.op("Relu", {x}, {}, "p"), b.op("Neg", {x}, {}, "q")}, int_attribute("axis", 1), "inner");
  ValueId outer = b.op("Concat", {b.op("Exp", {x}, {}, "r"), inner}, int_attribute("axis", 1), "outer");
  b.output(b.op("Abs", {outer}, {}, "out"));
  auto p = plan_graph(b.build(), nchw());
  EXPECT_EQ(p.alias_name("inner:0"), "outer:0");
  EXPECT_EQ(p.alias_name("q:0"), "inner:0");
  // q sits after r (4 channels) and p (4 channels) in outer: 8 channels of 3 elements.
  EXPECT_EQ(p.value("q:0").view.byte_offset - p.value("outer:0").view.byte_offset, 8 * 3 * 4);
  EXPECT_EQ(p.plan->stats.concat_in_place, 4);
  EXPECT_EQ(p.plan->stats.copies, 0);
}

TEST(PlannerIntent, ChunksConcatenatedBackAreNotCopied) {
  // torch's C2f: chunk a value, transform the last chunk, concatenate all of them.
  GraphBuilder b;
  ValueId y = b.op("MaxPool", {b.input("x", DType::kF32, {1, 8, 4, 4})}, ints_attribute("kernel_shape", {1, 1}), "y");
  auto chunks = b.ops("Split", {y, b.constant("sizes", i64_tensor({4, 4}))}, 2, int_attribute("axis", 1), "chunk");
  ValueId m = b.op("Sigmoid", {chunks[1]}, {}, "m");
  b.output(b.op("Concat", {chunks[0], chunks[1], m}, int_attribute("axis", 1), "cat"));
  auto p = plan_graph(b.build(), nchw());
  EXPECT_EQ(p.value("y:0").role, ValueRole::kConcatPart);
  EXPECT_EQ(p.value("y:0").view.byte_offset, p.value("cat:0").view.byte_offset);
  EXPECT_EQ(p.step("cat").kind, StepKind::kView);
  EXPECT_EQ(p.plan->stats.copies, 0);
}

TEST(PlannerIntent, ElementwiseRunsInPlaceOverADyingInputOnly) {
  GraphBuilder b;
  ValueId x = b.input("x", DType::kF32, {8, 8});
  ValueId a = b.op("Exp", {x}, {}, "a");
  ValueId s = b.op("Sigmoid", {a}, {}, "s");  // a is read later: no in place
  ValueId t = b.op("Tanh", {s}, {}, "t");     // s dies here: in place
  b.output(b.op("Add", {t, a}, {}, "out"));
  auto p = plan_graph(b.build(), nchw());
  EXPECT_EQ(p.value("s:0").role, ValueRole::kOwn);
  EXPECT_EQ(p.value("t:0").role, ValueRole::kInPlace);
  EXPECT_EQ(p.alias_name("t:0"), "s:0");
  EXPECT_EQ(p.value("t:0").view.byte_offset, p.value("s:0").view.byte_offset);
}

TEST(PlannerIntent, ADeadValuesMemoryIsReusedWhateverTheSizes) {
  GraphBuilder b;
  ValueId x = b.input("x", DType::kF32, {64, 64});
  ValueId big = b.op("Exp", {x}, {}, "big");                       // 16 KiB
  ValueId small = b.op("ReduceSum", {big, b.constant("axes", i64_tensor({1}))}, {}, "small");  // dies after
  ValueId later = b.op("Neg", {b.op("Relu", {small}, {}, "r")}, {}, "later");
  b.output(b.op("Add", {later, b.op("Exp", {x}, {}, "again")}, {}, "out"));
  PlanOptions options = nchw();
  options.in_place = false;
  auto p = plan_graph(b.build(), options);
  // 'again' (16 KiB) starts after 'big' died: it takes big's bytes.
  EXPECT_EQ(p.value("again:0").view.byte_offset, p.value("big:0").view.byte_offset);
  EXPECT_LE(p.plan->stats.arena_bytes, p.plan->stats.lower_bound_bytes * 11 / 10);
}

TEST(PlannerIntent, GraphOutputsAreNeverViews) {
  GraphBuilder b;
  ValueId x = b.op("Relu", {b.input("x", DType::kF32, {4, 6})}, {}, "relu");
  auto halves = b.ops("Split", {x, b.constant("sizes", i64_tensor({3, 3}))}, 2, int_attribute("axis", 1), "split");
  b.output(halves[1]);
  b.output(b.op("Neg", {halves[0]}, {}, "neg"));
  auto p = plan_graph(b.build(), nchw());
  EXPECT_EQ(p.value("split:0").role, ValueRole::kView);
  EXPECT_EQ(p.value("split:1").role, ValueRole::kOwn);
  EXPECT_EQ(p.value("split:1").view.allocation->label(), "outputs");
  EXPECT_EQ(p.step("split").kind, StepKind::kKernel);
}

// The caller's input cannot be placed anywhere: its Transpose's Reshape copies, visibly.
TEST(PlannerIntent, ReshapeOfATransposeIsAVisibleMaterialization) {
  GraphBuilder b;
  ValueId t = b.op("Transpose", {b.input("x", DType::kF32, {4, 6})}, {}, "t");
  b.output(b.op("Neg", {b.op("Reshape", {t, b.constant("shape", i64_tensor({24}))}, {}, "flat")}, {}, "out"));
  auto p = plan_graph(b.build(), nchw());
  EXPECT_EQ(p.value("t:0").role, ValueRole::kView);
  EXPECT_EQ(p.value("flat:0").role, ValueRole::kOwn);
  EXPECT_EQ(p.step("flat").kind, StepKind::kMaterialize);
  EXPECT_EQ(p.plan->stats.materializations, 1);
}

// Attention's merge of heads, (p @ v).transpose(1, 2).reshape(b, s, h * d): the product is
// written through the two views into the Reshape's bytes, and nothing copies.
TEST(PlannerIntent, AProductIsPlacedThroughATransposeIntoAReshape) {
  GraphBuilder b;
  ValueId y = b.op("MatMul", {b.input("p", DType::kF32, {2, 4, 5, 5}), b.input("v", DType::kF32, {2, 4, 5, 3})}, {}, "pv");
  ValueId t = b.op("Transpose", {y}, ints_attribute("perm", {0, 2, 1, 3}), "t");
  b.output(b.op("Neg", {b.op("Reshape", {t, b.constant("shape", i64_tensor({2, 5, 12}))}, {}, "merged")}, {}, "out"));
  auto p = plan_graph(b.build(), nchw());
  EXPECT_EQ(p.value("pv:0").role, ValueRole::kPlacedThrough);
  EXPECT_EQ(p.alias_name("pv:0"), "merged:0");
  EXPECT_EQ(p.value("pv:0").view.strides, (Strides{60, 3, 12, 1}));  // [b, h, s, d] inside [b, s, h * d]
  EXPECT_EQ(p.step("t").kind, StepKind::kView);
  EXPECT_EQ(p.step("merged").kind, StepKind::kView);
  EXPECT_EQ(p.plan->stats.materializations, 0);
  EXPECT_EQ(p.plan->stats.copies, 0);
}

TEST(PlannerIntent, ChannelChunksInChannelsLastAreStridedViews) {
  GraphBuilder b;
  ValueId y = b.op("MaxPool", {b.input("x", DType::kF32, {1, 8, 4, 4})}, ints_attribute("kernel_shape", {1, 1}), "y");
  auto chunks = b.ops("Split", {y, b.constant("sizes", i64_tensor({4, 4}))}, 2, int_attribute("axis", 1), "chunk");
  b.output(b.op("Add", {chunks[0], chunks[1]}, {}, "out"));
  PlanOptions options = verified();
  options.layout = LayoutChoice::kNhwc;
  auto p = plan_graph(b.build(), options);
  const TensorView& second = p.value("chunk:1").view;
  EXPECT_EQ(second.sizes, (Shape{1, 4, 4, 4}));  // logical sizes stay in ONNX order
  EXPECT_EQ(second.strides, (Strides{128, 1, 32, 8}));
  EXPECT_FALSE(is_packed(second));
}

// In nhwc only images take channels-last strides: attention scores [batch, heads, q, k]
// are rank 4 too, but a matmul's rows must not interleave the heads (cuBLASLt refuses them).
TEST(PlannerIntent, OnlyImagesAreChannelsLast) {
  GraphBuilder b;
  ValueId image = b.op("MaxPool", {b.input("x", DType::kF32, {1, 4, 6, 6})}, ints_attribute("kernel_shape", {1, 1}), "pool");
  ValueId activated = b.op("Relu", {image}, {}, "relu");
  ValueId q = b.input("q", DType::kF32, {1, 4, 6, 8});
  ValueId scores = b.op("MatMul", {q, b.op("Transpose", {q}, ints_attribute("perm", {0, 1, 3, 2}), "k")}, {}, "scores");
  b.output(b.op("Neg", {activated}, {}, "out1"));
  b.output(b.op("Neg", {b.op("Softmax", {scores}, int_attribute("axis", -1), "probs")}, {}, "out2"));
  PlanOptions options = verified();
  options.layout = LayoutChoice::kNhwc;
  auto p = plan_graph(b.build(), options);
  EXPECT_EQ(p.value("pool:0").view.strides, (Strides{144, 1, 24, 4}));
  EXPECT_EQ(p.value("relu:0").view.strides, (Strides{144, 1, 24, 4}));  // an elementwise map of an image
  EXPECT_EQ(p.value("scores:0").view.strides, (Strides{144, 36, 6, 1}));
  EXPECT_EQ(p.value("probs:0").view.strides, (Strides{144, 36, 6, 1}));
}

TEST(PlannerIntent, UnoptimizedPlansCopyEverything) {
  GraphBuilder b;
  ValueId x = b.op("Relu", {b.input("x", DType::kF32, {4, 6})}, {}, "relu");
  auto halves = b.ops("Split", {x, b.constant("sizes", i64_tensor({3, 3}))}, 2, int_attribute("axis", 1), "split");
  b.output(b.op("Concat", {halves[1], halves[0]}, int_attribute("axis", 1), "cat"));
  auto p = plan_graph(b.build(), verified(unoptimized_plan_options()));
  EXPECT_EQ(p.plan->stats.views, 0);
  EXPECT_EQ(p.plan->stats.concat_in_place, 0);
  EXPECT_EQ(p.plan->stats.copies, 4);
}

// A copy of a plan's data (not its allocations) for a test to break.
Plan copy_to_break(const Plan& plan) {
  Plan copy;
  copy.buffers = plan.buffers;
  copy.steps = plan.steps;
  copy.values = plan.values;
  return copy;
}

TEST(VerifyPlan, CatchesTwoLiveBuffersSharingBytes) {
  GraphBuilder b;
  ValueId x = b.input("x", DType::kF32, {8, 8});
  ValueId a = b.op("Exp", {x}, {}, "a");
  ValueId c = b.op("Neg", {x}, {}, "c");
  b.output(b.op("Add", {a, c}, {}, "out"));
  auto p = plan_graph(b.build(), nchw());
  Plan broken = copy_to_break(*p.plan);
  ASSERT_TRUE(verify_plan(*p.graph, broken).is_ok());
  // Move c's buffer onto a's while both are live: exactly, or partly from either side (a
  // buffer of 256 bytes; offsets stay 64-byte aligned, which verify_plan checks first).
  int a_buffer = p.value("a:0").buffer, c_buffer = p.value("c:0").buffer;
  ASSERT_EQ(broken.buffers[size_t(a_buffer)].size, 256);
  const int64_t a_offset = broken.buffers[size_t(a_buffer)].offset + 1024;
  broken.buffers[size_t(a_buffer)].offset = a_offset;  // room below it
  broken.buffers[size_t(c_buffer)].offset = a_offset + 1024;
  Status moved = verify_plan(*p.graph, broken);
  ASSERT_TRUE(moved.is_ok()) << "apart, the moved buffers overlap nothing: " << moved.to_string();
  for (int64_t shift : {0, 64, 192, -64, -192}) {
    broken.buffers[size_t(c_buffer)].offset = a_offset + shift;
    Status s = verify_plan(*p.graph, broken);
    ASSERT_FALSE(s.is_ok()) << "c at a's offset " << shift;
    EXPECT_NE(s.message().find("overlap"), std::string::npos) << s.message();
  }
}

// Two parts of one in-place Concat are written by different steps into one buffer and
// are both live until the Concat's reader: moved onto each other's bytes, they are an
// error (they alias the Concat's value, not each other).
TEST(VerifyPlan, CatchesTwoLiveWritersOfOneBufferSharingBytes) {
  auto p = plan_graph(concat_of_two_parts(), nchw());
  ASSERT_EQ(p.value("b:0").role, ValueRole::kConcatPart);
  Plan broken = copy_to_break(*p.plan);
  ASSERT_TRUE(verify_plan(*p.graph, broken).is_ok());
  broken.values[size_t(*p.graph->find_value("b:0"))]->view.byte_offset = p.value("a:0").view.byte_offset + 64;
  Status s = verify_plan(*p.graph, broken);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("written by different steps, live together and overlap"), std::string::npos)
      << s.message();
}

// The packer's lifetimes are what verify_plan checks, so it recomputes them from the
// steps: a lifetime cut one step short (the off-by-one that once let two live values
// share bytes and was caught only by wrong outputs) is an error naming the buffer.
TEST(VerifyPlan, RecomputesLifetimesAndCatchesOneCutShort) {
  GraphBuilder b;
  ValueId x = b.input("x", DType::kF32, {8, 8});
  ValueId a = b.op("Exp", {x}, {}, "a");
  ValueId c = b.op("Neg", {a}, {}, "c");
  ValueId d = b.op("Sigmoid", {c}, {}, "d");
  b.output(b.op("Add", {a, d}, {}, "out"));
  auto p = plan_graph(b.build(), nchw());
  Plan broken = copy_to_break(*p.plan);
  ASSERT_TRUE(verify_plan(*p.graph, broken).is_ok());
  PlanBuffer& a_buffer = broken.buffers[size_t(p.value("a:0").buffer)];
  ASSERT_EQ(a_buffer.kind, StorageKind::kArena);
  a_buffer.last_step -= 1;  // 'a' is read by the last step; the packer now thinks it died before
  Status s = verify_plan(*p.graph, broken);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("was packed as live in steps"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("'a:0'"), std::string::npos) << s.message();
}

TEST(Overlap, InterleavedSlicesOfOneConcatAreDisjoint) {
  std::vector<std::byte> bytes(4096);
  Allocation alloc(1, "arena", "cpu", bytes.data(), 4096, 64, StorageMode::kHost, true);
  // A channels-last [1, 16, 4, 4] tensor: channel slices interleave in memory.
  TensorView whole = *make_view(alloc, 0, DType::kF32, {1, 16, 4, 4}, {256, 1, 64, 16}, "whole");
  TensorView first = *slice_view(whole, 1, 0, 8, 1), second = *slice_view(whole, 1, 8, 16, 1);
  TensorView middle = *slice_view(whole, 1, 4, 12, 1);
  EXPECT_TRUE(footprint(first).overlaps(footprint(second)));  // footprints interleave...
  EXPECT_FALSE(may_overlap(first, second));                   // ...the elements do not
  EXPECT_TRUE(may_overlap(first, middle));
  EXPECT_TRUE(may_overlap(middle, second));
  // Rows 0-1 and rows 2-3 of one channel slice: disjoint; rows 1-2: overlap both.
  TensorView top = *slice_view(first, 2, 0, 2, 1), bottom = *slice_view(first, 2, 2, 4, 1);
  TensorView band = *slice_view(first, 2, 1, 3, 1);
  EXPECT_FALSE(may_overlap(top, bottom));
  EXPECT_TRUE(may_overlap(top, band));
  EXPECT_TRUE(may_overlap(band, bottom));
}

}  // namespace
}  // namespace strider
