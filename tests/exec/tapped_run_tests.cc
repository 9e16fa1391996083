// The tapped run `strider check` uses to find the first bad node: every kernel step's
// output read right after its step, through the hazard tracker, on the very plan `run`
// executes (in-place writes and arena reuse included), and first_divergence over them.
#include <gtest/gtest.h>

#include <filesystem>

#include "strider/compare.h"
#include "exec/session_internal.h"
#include "onnx/importer.h"
#include "reference/reference.h"
#include "support/test_util.h"

namespace strider {
namespace {
namespace fs = std::filesystem;

std::vector<double> doubles(const Tensor& t) {
  std::vector<double> v;
  for (int64_t i = 0; i < t.num_elements(); ++i) v.push_back(t.element_as_double(i));
  return v;
}

class TappedRun : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

// C2f's plan writes SiLU in place over the conv output and reuses arena bytes: a tap read
// late would hold the later value, one read early the poison. Each must match the
// reference value of its own node, on cpu and on sim with two queues.
TEST_P(TappedRun, EveryStepOutputMatchesTheReferenceAndOutputsMatchRun) {
  const auto& [device, layout] = GetParam();
  fs::path dir = fs::path(STRIDER_SOURCE_DIR) / "models/seed/C2f_split_op17";
  auto graph = import_model_file((dir / "model.onnx").string());
  ASSERT_TRUE(graph.is_ok());
  SessionOptions options;
  options.device = device;
  options.layout = *parse_layout(layout);
  options.queues = device == "sim" ? 2 : 1;
  options.sanitize = true;
  auto session = create_session(*graph, options);
  ASSERT_TRUE(session.is_ok()) << session.status().to_string();
  Tensor x = testing::random_tensor(DType::kF32, (*session)->inputs()[0].shape, 3);
  auto taps = run_with_taps(**session, {x});
  ASSERT_TRUE(taps.is_ok()) << taps.status().to_string();
  auto outputs = (*session)->run({x});
  ASSERT_TRUE(outputs.is_ok());
  auto reference = evaluate_reference(*graph, {{(*session)->inputs()[0].name, x}}, true);
  ASSERT_TRUE(reference.is_ok());
  std::map<std::string, std::vector<double>> expected;
  for (const auto& [id, value] : reference->values) {
    std::vector<double> v;
    for (int64_t i = 0; i < value.num_elements(); ++i) v.push_back(value.element_as_double(i));
    expected[graph->value(id).name] = std::move(v);
  }
  std::vector<NodeValue> values;
  int compared = 0;
  for (const TappedValue& t : *taps) {
    values.push_back({t.value, t.node, t.op_type, doubles(t.tensor)});
    compared += expected.count(t.value) != 0;
    if (t.value == (*session)->outputs()[0].name) {
      EXPECT_EQ(doubles(t.tensor), doubles((*outputs)[0]));
    }
  }
  EXPECT_GE(compared, 6);  // the convs (SiLUs and residual adds fused into them), the concat
  auto bad = first_divergence(values, expected, default_tolerance(DType::kF32));
  EXPECT_FALSE(bad.has_value()) << values[bad->index].node << ": " << bad->comparison.reason;
}

INSTANTIATE_TEST_SUITE_P(DevicesAndLayouts, TappedRun,
                         ::testing::Combine(::testing::Values("cpu", "sim"), ::testing::Values("nchw", "nhwc")));

TEST(FirstDivergence, NamesTheFirstFailingValueAndSkipsThoseWithoutAReference) {
  std::map<std::string, std::vector<double>> reference{{"a", {1, 2, 3}}, {"c", {4, 5, 6}}, {"d", {7, 8, 9}}};
  std::vector<NodeValue> values{{"a", "A", "Relu", {1, 2, 3}},
                                {"b.dense", "M", "Materialize", {0, 0, 0}},  // strider's own: no reference
                                {"c", "C", "Conv", {4, 5.5, 6}},
                                {"d", "D", "Add", {0, 0, 0}}};
  auto bad = first_divergence(values, reference, Tolerance{});
  ASSERT_TRUE(bad.has_value());
  EXPECT_EQ(values[bad->index].node, "C");
  EXPECT_DOUBLE_EQ(bad->comparison.max_abs_error, 0.5);
  values[2].actual = {4, 5, 6};
  bad = first_divergence(values, reference, Tolerance{});
  ASSERT_TRUE(bad.has_value());
  EXPECT_EQ(values[bad->index].node, "D");
  values[3].actual = {7, 8, 9};
  EXPECT_FALSE(first_divergence(values, reference, Tolerance{}).has_value());
}

}  // namespace
}  // namespace strider
