// The attention blocks of the zoo's transformers (models/zoo), planned as `strider inspect`
// plans them: the fused QKV projection's three chunks (Split, or the Slices of torch's
// Tensor.chunk lowering), the heads' view/reshape and every transpose are views of the
// projection's bytes, the merge of the heads after attention is a view too (the product is
// placed through it), the scores, softmax and weighted sum are one FusedAttention reading
// the keys through their transposed view, and the KV-cache decoder's new keys and values reach the Concat that
// writes the present outputs as views, so that Concat is the block's one copy.
#include <gtest/gtest.h>

#include <filesystem>

#include "onnx/importer.h"
#include "ops/fused_attention.h"
#include "plan/dump.h"
#include "plan_test_util.h"

namespace strider {
namespace {
namespace fs = std::filesystem;

testing::PlannedGraph plan_zoo(const std::string& model, LayoutChoice layout) {
  auto graph = import_model_file((fs::path(STRIDER_SOURCE_DIR) / "models/zoo" / model / "model.onnx").string());
  EXPECT_TRUE(graph.is_ok()) << graph.status().to_string();
  PlanOptions options = testing::verified();
  options.layout = layout;
  return testing::plan_in_session(std::move(*graph), options, SessionOptions{});
}

bool produced_by(const Graph& g, ValueId v, std::initializer_list<std::string_view> ops) {
  NodeId producer = g.value(v).producer;
  if (producer == kNoNode) return false;
  for (std::string_view op : ops)
    if (g.node(producer).op_type == op) return true;
  return false;
}

class AttentionPlan : public ::testing::TestWithParam<std::string> {};

TEST_P(AttentionPlan, QkvChunksHeadsAndTransposesAreViews) {
  for (LayoutChoice layout : {LayoutChoice::kNchw, LayoutChoice::kNhwc}) {
    testing::PlannedGraph p = plan_zoo(GetParam(), layout);
    ASSERT_NE(p.plan, nullptr);
    const Graph& g = *p.graph;
    int chunks = 0, head_views = 0, transposes = 0, merges = 0, fused = 0;
    for (const PlanStep& step : p.plan->steps) {
      const Node& node = g.node(step.node);
      const bool chunk = node.op_type == "Split" || (node.op_type == "Slice" && produced_by(g, node.inputs[0], {"MatMul", "Add", "FusedMatMul"}));
      const bool head_view = node.op_type == "Reshape" && produced_by(g, node.inputs[0], {"Split", "Slice"});
      // (probs @ v).transpose(1, 2).reshape(...): the product is placed through both views.
      const bool merge = node.op_type == "Reshape" && produced_by(g, node.inputs[0], {"Transpose"}) &&
                         produced_by(g, g.node(g.value(node.inputs[0]).producer).inputs[0], {"MatMul", "FusedAttention"});
      merges += merge;
      if (node.op_type == "FusedAttention") {  // softmax(q @ kt ...) @ v, reading kt as K's transposed view
        ++fused;
        EXPECT_EQ(p.value(g.value(node.inputs[1]).name).role, ValueRole::kView) << node.name;
        EXPECT_TRUE(produced_by(g, node.inputs[1], {"Transpose"})) << node.name;
      }
      if (!chunk && !head_view && !merge && node.op_type != "Transpose") continue;
      EXPECT_EQ(step.kind, StepKind::kView) << node.op_type << " '" << node.name << "' is a "
                                            << step_kind_name(step.kind);
      chunks += chunk;
      head_views += head_view;
      transposes += node.op_type == "Transpose";
    }
    EXPECT_GE(chunks, 1) << "no QKV chunk found";
    EXPECT_GE(head_views, 3) << "no head reshapes found";
    EXPECT_GE(transposes, 3);
    EXPECT_GE(merges, 1) << "no head merge found";
    EXPECT_GE(fused, 2) << "attention not fused";  // every model here has two blocks or more
  }
}

INSTANTIATE_TEST_SUITE_P(Zoo, AttentionPlan,
                         ::testing::Values("BertEncoder_op17", "BertEncoder_op14", "Gpt2Decoder_op17", "LlamaDecoder_op17",
                                           "T5Encoder_op17", "KvCacheDecoder_op17", "mobilevit_ci_op17"));

TEST(AttentionPlan, KvCacheConcatReadsTheNewKeysAndValuesAsViews) {
  testing::PlannedGraph p = plan_zoo("KvCacheDecoder_op17", LayoutChoice::kNchw);
  ASSERT_NE(p.plan, nullptr);
  const Graph& g = *p.graph;
  int concats = 0;
  for (const PlanStep& step : p.plan->steps) {
    const Node& node = g.node(step.node);
    if (node.op_type != "Concat") continue;
    ++concats;
    // Part 0 is the caller's past (an input, copied); part 1 the new heads, a view of the
    // fused projection; the output is the graph's present output itself.
    EXPECT_EQ(p.value(g.value(node.inputs[1]).name).role, ValueRole::kView) << node.name;
    EXPECT_NE(std::find(g.outputs().begin(), g.outputs().end(), node.outputs[0]), g.outputs().end()) << node.name;
  }
  EXPECT_EQ(concats, 4);  // key and value of two layers
}

// Llama's grouped-query heads and rotary embedding. repeat_kv (Unsqueeze, Expand, Reshape)
// made the Reshape a copy of every key and value head (the Expand's stride 0 does not
// merge); the attention now reads the two key heads in place for its eight query heads
// (kv_repeat 4), so no Reshape copies and the repeats are gone. x * cos + rotate_half(x) *
// sin ran a Neg, a Concat copy and a map; split into its halves (passes/split_rotary.h) it
// is two maps written into their Concat's halves in place: no Neg, no copying Concat.
TEST(AttentionPlan, LlamaReadsKeyHeadsAndWritesRotaryHalvesInPlace) {
  testing::PlannedGraph p = plan_zoo("LlamaDecoder_op17", LayoutChoice::kNchw);
  ASSERT_NE(p.plan, nullptr);
  const Graph& g = *p.graph;
  int fused = 0, halves = 0;
  for (const PlanStep& step : p.plan->steps) {
    const Node& node = g.node(step.node);
    EXPECT_NE(node.op_type, "Expand") << node.name;
    EXPECT_NE(node.op_type, "Neg") << node.name;
    if (node.op_type == "Reshape" || node.op_type == "Concat") {
      EXPECT_EQ(step.kind, StepKind::kView) << node.name << " is a " << step_kind_name(step.kind);
    }
    if (node.op_type == "FusedElementwise" && node.name.find("rotary_half") != std::string::npos) ++halves;
    if (node.op_type != "FusedAttention") continue;
    ++fused;
    auto params = read_fused_attention(node);
    ASSERT_TRUE(params.is_ok());
    EXPECT_EQ(params->kv_repeat, 4) << node.name;
    EXPECT_EQ(g.value(node.inputs[kAttnV]).shape[1], 2) << node.name;   // the value heads themselves
    EXPECT_EQ(g.value(node.inputs[kAttnKt]).shape[1], 2) << node.name;  // the key heads, transposed
    EXPECT_EQ(p.value(g.value(node.inputs[kAttnKt]).name).role, ValueRole::kView) << node.name;
  }
  EXPECT_EQ(fused, 2);
  EXPECT_EQ(halves, 8);  // two halves of q and of k, two blocks
}

// Attention-23 has no kernel on any device: it runs as its function body
// (passes/expand_functions.h), each node of which says where it came from, in the plan
// text too; the 3-D inputs' head splits are views.
TEST(AttentionPlan, AttentionRunsExpandedAndSaysSo) {
  GraphBuilder b(23);
  AttributeMap attrs;
  attrs.set_int("q_num_heads", 4);
  attrs.set_int("kv_num_heads", 2);
  attrs.set_int("is_causal", 1);
  auto outs = b.ops("Attention", {b.input("q", DType::kF32, {2, 5, 32}), b.input("k", DType::kF32, {2, 5, 16}),
                                  b.input("v", DType::kF32, {2, 5, 16})},
                    1, attrs, "attn");
  b.output(outs[0]);
  testing::PlannedGraph p = testing::plan_in_session(b.build(), testing::verified(), SessionOptions{});
  ASSERT_NE(p.plan, nullptr);
  const Graph& g = *p.graph;
  int transposes = 0;
  for (const PlanStep& step : p.plan->steps) {
    const Node& node = g.node(step.node);
    EXPECT_EQ(node.expanded_from, "Attention 'attn'") << node.name;
    if (node.op_type == "Transpose" && produced_by(g, node.inputs[0], {"Reshape"})) {
      EXPECT_EQ(step.kind, StepKind::kView) << node.name;
      ++transposes;
    }
  }
  EXPECT_GE(transposes, 3);  // the heads of Q, K and V
  EXPECT_NE(plan_to_text(g, *p.plan).find("(expanded from Attention 'attn')"), std::string::npos);
}

}  // namespace
}  // namespace strider
