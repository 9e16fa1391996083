// Intent tests of passes/merge_sibling_matmuls.h: which MatMuls merge, what the merged graph
// computes (against the float64 reference of the graph as built, f32 and bf16), that the
// parts are views of the one product, and that the joined weights are made once for the
// plans of one model. The CPU device does not merge (Device::merges_sibling_matmuls; sim
// and CUDA do), so most tests run the pass themselves and plan what it wrote on the CPU.
#include <gtest/gtest.h>

#include <filesystem>

#include "onnx/importer.h"
#include "passes/lower_precision.h"
#include "passes/merge_sibling_matmuls.h"
#include "plan_test_util.h"
#include "strider/tensor_file.h"

namespace strider {
namespace {
namespace fs = std::filesystem;
using testing::random_f32;

// x = Neg(input) [2, 5, 16], read by MatMuls of widths `widths`; `biased[k]` adds a bias
// [width] to product k (as Add(bias, product) for odd k, the other order for even ones);
// each result goes through its own Tanh to an output.
Graph siblings_graph(const std::vector<int64_t>& widths, const std::vector<bool>& biased, bool product_is_output = false,
                     int opset = 17) {
  GraphBuilder b(opset);
  ValueId x = b.op("Neg", {b.input("x", DType::kF32, {2, 5, 16})}, {}, "neg");
  for (size_t k = 0; k < widths.size(); ++k) {
    const std::string n = std::to_string(k);
    ValueId y = b.op("MatMul", {x, b.constant("w" + n, random_f32({16, widths[k]}, 100 + k))}, {}, "proj" + n);
    if (product_is_output && k == 0) b.output(y);
    if (biased[k]) {
      ValueId bias = b.constant("b" + n, random_f32({widths[k]}, 200 + k));
      y = b.op("Add", k % 2 ? std::vector<ValueId>{bias, y} : std::vector<ValueId>{y, bias}, {}, "bias" + n);
    }
    b.output(b.op("Tanh", {y}, {}, "tanh" + n));
  }
  return b.build();
}

Graph inferred(Graph g) {
  Status s = infer_and_fold(g);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  return g;
}

std::vector<std::string> op_types(const Graph& g) {
  std::vector<std::string> ops;
  for (NodeId id = 0; id < g.num_nodes(); ++id) ops.push_back(g.node(id).op_type);
  return ops;
}

// The merged graph planned on the CPU, run on seeded inputs, against the reference of `built`.
// Where no part is a graph output, the parts are views of the one product.
void expect_merged_matches_reference(const Graph& built, const Graph& merged, DType dtype, bool parts_are_views = true) {
  SessionOptions options;
  options.dtype = dtype;
  options.poison_memory = true;
  auto p = testing::plan_in_session(merged, testing::verified(), options);
  ASSERT_NE(p.session, nullptr);
  Tensor input = random_f32({2, 5, 16}, 7);
  Tensor seen = dtype == DType::kBF16 ? *convert_float_tensor(*convert_float_tensor(input, DType::kBF16), DType::kF32) : input;
  auto outputs = p.session->run({input});
  ASSERT_TRUE(outputs.is_ok()) << outputs.status().to_string();
  auto expected = evaluate_reference(built, {{"x", seen}});
  ASSERT_TRUE(expected.is_ok()) << expected.status().to_string();
  testing::expect_outputs_near(*outputs, expected->outputs, default_tolerance(dtype));
  for (const PlanStep& step : p.plan->steps) {
    if (parts_are_views && p.graph->node(step.node).op_type == "Split") {
      EXPECT_EQ(step.kind, StepKind::kView);
    }
  }
}

TEST(SiblingMatMuls, BiasedProjectionsBecomeOneProductItsBiasAndViews) {
  const Graph built = siblings_graph({8, 4, 12}, {true, true, true});
  Graph g = inferred(built);
  auto merged = merge_sibling_matmuls(g);
  ASSERT_TRUE(merged.is_ok()) << merged.status().to_string();
  EXPECT_EQ(*merged, 1);
  EXPECT_EQ(op_types(g), (std::vector<std::string>{"Neg", "MatMul", "Add", "Split", "Tanh", "Tanh", "Tanh"}));
  const Node& product = g.node(1);
  EXPECT_EQ(g.value(product.inputs[1]).shape, (Shape{16, 24}));
  // Column j of the joined weight is column j - offset of its part; the biases likewise.
  const Tensor& w = *g.value(product.inputs[1]).constant;
  const Tensor& w1 = *built.value(*built.find_value("w1")).constant;
  for (int64_t r = 0; r < 16; ++r)
    for (int64_t c = 0; c < 4; ++c) EXPECT_EQ(w.element_as_double(r * 24 + 8 + c), w1.element_as_double(r * 4 + c));
  const Tensor& bias = *g.value(g.node(2).inputs[1]).constant;
  const Tensor& b2 = *built.value(*built.find_value("b2")).constant;
  for (int64_t c = 0; c < 12; ++c) EXPECT_EQ(bias.element_as_double(12 + c), b2.element_as_double(c));
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    SCOPED_TRACE(dtype_name(dtype));
    expect_merged_matches_reference(built, g, dtype);
  }
}

TEST(SiblingMatMuls, SiblingsWithAndWithoutABiasMergeApart) {
  const Graph built = siblings_graph({8, 4, 6, 10}, {true, false, true, false});
  Graph g = inferred(built);
  ASSERT_EQ(*merge_sibling_matmuls(g), 2);
  EXPECT_EQ(op_types(g),
            (std::vector<std::string>{"Neg", "MatMul", "Add", "Split", "Tanh", "MatMul", "Split", "Tanh", "Tanh", "Tanh"}));
  expect_merged_matches_reference(built, g, DType::kF32);
  // One biased sibling alone stays as it was; the two plain ones merge.
  Graph lone = inferred(siblings_graph({8, 4, 6}, {true, false, false}));
  ASSERT_EQ(*merge_sibling_matmuls(lone), 1);
  EXPECT_EQ(op_types(lone), (std::vector<std::string>{"Neg", "MatMul", "Add", "Tanh", "MatMul", "Split", "Tanh", "Tanh"}));
}

TEST(SiblingMatMuls, AProductThatIsAGraphOutputKeepsItsBiasApart) {
  const Graph built = siblings_graph({8, 4}, {true, true}, /*product_is_output=*/true);
  Graph g = inferred(built);
  // proj0's product is an output, so its Add is not its own: proj0 is plain, proj1 biased, alone each.
  ASSERT_EQ(*merge_sibling_matmuls(g), 0);
  Graph plain_output = inferred(siblings_graph({8, 4}, {false, false}, true));
  ASSERT_EQ(*merge_sibling_matmuls(plain_output), 1);
  expect_merged_matches_reference(siblings_graph({8, 4}, {false, false}, true), plain_output, DType::kF32, false);
}

TEST(SiblingMatMuls, OnlyConstantTwoDimensionalWeightsAfterTheActivationJoin) {
  GraphBuilder b;
  ValueId x = b.op("Neg", {b.input("x", DType::kF32, {2, 5, 16})}, {}, "neg");
  ValueId w = b.op("Neg", {b.input("w", DType::kF32, {16, 8})}, {}, "w_neg");  // a weight computed at run time
  b.output(b.op("MatMul", {x, w}, {}, "computed_weight"));
  b.output(b.op("MatMul", {x, b.constant("w1", random_f32({16, 4}, 1))}, {}, "sibling1"));
  b.output(b.op("MatMul", {b.constant("a", random_f32({3, 5}, 2)), x}, {}, "x_second"));
  b.output(b.op("MatMul", {x, b.constant("w3", random_f32({2, 16, 4}, 3))}, {}, "batched_weight"));
  b.output(b.op("MatMul", {x, b.constant("w4", random_f32({16, 6}, 4))}, {}, "sibling2"));
  const Graph built = b.build();
  Graph g = inferred(built);
  ASSERT_EQ(*merge_sibling_matmuls(g), 1);
  int matmuls = 0;
  for (NodeId id = 0; id < g.num_nodes(); ++id) {
    const Node& n = g.node(id);
    if (n.op_type != "MatMul") continue;
    ++matmuls;
    if (n.name.find("siblings") != std::string::npos) {
      EXPECT_EQ(g.value(n.inputs[1]).shape, (Shape{16, 10}));
    }
  }
  EXPECT_EQ(matmuls, 4);
  SessionOptions options;
  options.poison_memory = true;
  auto p = testing::plan_in_session(g, testing::verified(), options);
  ASSERT_NE(p.session, nullptr);
  Tensor xs = random_f32({2, 5, 16}, 5), ws = random_f32({16, 8}, 6);
  auto outputs = p.session->run(std::vector<Tensor>{xs, ws});
  ASSERT_TRUE(outputs.is_ok()) << outputs.status().to_string();
  auto expected = evaluate_reference(built, {{"x", xs}, {"w", ws}});
  ASSERT_TRUE(expected.is_ok()) << expected.status().to_string();
  testing::expect_outputs_near(*outputs, expected->outputs, default_tolerance(DType::kF32));
}

// Before opset 13 Split takes its sizes as an attribute.
TEST(SiblingMatMuls, AnOpset11ModelSplitsByAttribute) {
  const Graph built = siblings_graph({8, 4}, {true, true}, false, 11);
  Graph g = inferred(built);
  ASSERT_EQ(*merge_sibling_matmuls(g), 1);
  for (NodeId id = 0; id < g.num_nodes(); ++id) {
    if (g.node(id).op_type != "Split") continue;
    EXPECT_EQ(g.node(id).inputs.size(), 1u);
    EXPECT_EQ(*g.node(id).attributes.get_ints("split", {}), (std::vector<int64_t>{8, 4}));
  }
  expect_merged_matches_reference(built, g, DType::kF32);
}

// Empty products (K = 0: every output an empty sum, 0) stay apart: there is nothing to join.
TEST(SiblingMatMuls, EmptyDepthStaysApartAndRunsOnSim) {
  GraphBuilder b;
  ValueId x = b.op("Neg", {b.input("x", DType::kF32, {3, 0})}, {}, "neg");
  b.output(b.op("MatMul", {x, b.constant("w0", Tensor(DType::kF32, {0, 4}))}, {}, "proj0"));
  b.output(b.op("MatMul", {x, b.constant("w1", Tensor(DType::kF32, {0, 2}))}, {}, "proj1"));
  const Graph built = b.build();
  Graph g = inferred(built);
  ASSERT_EQ(*merge_sibling_matmuls(g), 0);
  SessionOptions options;
  options.device = "sim";
  auto session = create_session(built, options);
  ASSERT_TRUE(session.is_ok()) << session.status().to_string();
  auto out = (*session)->run({Tensor(DType::kF32, {3, 0})});
  ASSERT_TRUE(out.is_ok()) << out.status().to_string();
  for (const Tensor& t : *out)
    for (int64_t k = 0; k < t.num_elements(); ++k) EXPECT_EQ(t.element_as_double(k), 0.0);
}

// A bf16 model's plans (a DynamicSession's shapes) lower their weights anew each time; the
// joined weights are keyed by the f32 weights the lowered ones came from, so each is made once.
TEST(SiblingMatMuls, TheJoinedWeightsAreMadeOncePerModel) {
  const Graph built = inferred(siblings_graph({8, 4}, {true, true}));
  LoweredConstants lowered;
  MergedWeights cache;
  auto origin = [&](const std::shared_ptr<const Tensor>& t) { return lowered.source_of(t); };
  std::vector<Graph> plans;
  for (int shape = 0; shape < 3; ++shape) {
    plans.push_back(built);  // shares the f32 weights, as a DynamicSession's copies do
    ASSERT_TRUE(lower_to_bf16(plans.back(), &lowered).is_ok());
    ASSERT_EQ(*merge_sibling_matmuls(plans.back(), &cache, origin), 1);
  }
  EXPECT_EQ(cache.joins(), 2);  // the weight and the bias
  auto joined_weight = [](const Graph& g) {
    for (NodeId id = 0; id < g.num_nodes(); ++id)
      if (g.node(id).op_type == "MatMul") return g.node(id).inputs.at(1);
    return kNoValue;
  };
  const ValueId w0 = joined_weight(plans[0]), w2 = joined_weight(plans[2]);
  ASSERT_NE(w0, kNoValue);
  EXPECT_EQ(plans[0].value(w0).constant, plans[2].value(w2).constant);
  EXPECT_EQ(plans[0].value(w0).dtype, DType::kBF16);
  // Without the origins each plan's new lowered copies would be new keys.
  MergedWeights by_part;
  for (int shape = 0; shape < 2; ++shape) {
    Graph g = built;
    ASSERT_TRUE(lower_to_bf16(g, &lowered).is_ok());
    ASSERT_EQ(*merge_sibling_matmuls(g, &by_part), 1);
  }
  EXPECT_EQ(by_part.joins(), 4);
}

// The zoo's Whisper (query and value projections with biases, the key's without) and Llama
// (gate and up) merged, against the same model unmerged, on their test inputs.
TEST(SiblingMatMuls, ZooModelsComputeWhatTheyDidUnmerged) {
  for (const auto& [model, groups] : std::vector<std::pair<std::string, int>>{{"WhisperEncoder_op17", 2}, {"LlamaDecoder_op17", 2}}) {
    SCOPED_TRACE(model);
    const fs::path dir = fs::path(STRIDER_SOURCE_DIR) / "models/zoo" / model;
    auto imported = import_model_file((dir / "model.onnx").string());
    ASSERT_TRUE(imported.is_ok()) << imported.status().to_string();
    Graph merged = inferred(*imported);
    ASSERT_EQ(*merge_sibling_matmuls(merged), groups);
    auto input = read_tensor_file((dir / "test_data_set_0/input_0.pb").string());
    ASSERT_TRUE(input.is_ok()) << input.status().to_string();
    std::vector<std::vector<Tensor>> results;
    for (Graph* g : {&*imported, &merged}) {
      auto session = create_session(*g, SessionOptions{});
      ASSERT_TRUE(session.is_ok()) << session.status().to_string();
      auto out = (*session)->run({*input});
      ASSERT_TRUE(out.is_ok()) << out.status().to_string();
      results.push_back(std::move(*out));
    }
    testing::expect_outputs_near(results[1], results[0], default_tolerance(DType::kF32), model);
  }
}

// The devices' choice: sim merges as CUDA does (so CI checks the GPU's graphs on it), the
// CPU keeps the siblings apart.
TEST(SiblingMatMuls, SimSessionsMergeAndCpuSessionsDoNot) {
  auto imported = import_model_file((fs::path(STRIDER_SOURCE_DIR) / "models/zoo/WhisperEncoder_op17/model.onnx").string());
  ASSERT_TRUE(imported.is_ok()) << imported.status().to_string();
  for (const char* device : {"sim", "cpu"}) {
    SessionOptions options;
    options.device = device;
    auto session = create_session(*imported, options);
    ASSERT_TRUE(session.is_ok()) << session.status().to_string();
    const Graph& g = *inspect_session(**session).graph;
    int merged = 0;
    for (NodeId id = 0; id < g.num_nodes(); ++id) merged += g.node(id).name.find("/siblings_MatMul") != std::string::npos;
    EXPECT_EQ(merged, std::string(device) == "sim" ? 2 : 0) << device;
  }
}

}  // namespace
}  // namespace strider
