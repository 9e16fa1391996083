// The seed scenarios on the sim device with 2 and 3 queues over 200 seeds each: correct
// and free of sanitizer findings; with every cross-queue wait dropped, some seed gives a
// wrong answer and the sanitizer names the dropped edge. If the hazard tracker were
// removed, these tests would fail the same way.
#include <gtest/gtest.h>

#include <filesystem>

#include "base/float16.h"
#include "strider/compare.h"
#include "exec/session_internal.h"
#include "reference/reference.h"
#include "support/test_util.h"

namespace strider {
namespace {
namespace fs = std::filesystem;

struct Scenario {
  std::string model, layout;
};

// A seed model and its float64 reference output.
struct Loaded {
  Graph graph;
  Tensor input;
  std::vector<double> expected;
};

Loaded load(const std::string& model) {
  testing::SeedModel seed = testing::load_seed_model(model);
  Loaded l{std::move(seed.graph), std::move(seed.input), {}};
  auto reference = evaluate_reference(l.graph, {{l.graph.value(l.graph.inputs()[0]).name, l.input}});
  for (int64_t i = 0; i < reference->outputs[0].num_elements(); ++i)
    l.expected.push_back(reference->outputs[0].element_as_double(i));
  return l;
}

// The outcome of one sim run: its status and whether its output matched the reference.
struct Outcome {
  Status status;
  bool correct = false;
};

Outcome run_on_sim(const Loaded& l, const std::string& layout, int queues, uint64_t seed, bool sanitize,
                   bool drop_waits) {
  SessionOptions options;
  options.device = "sim";
  options.layout = *parse_layout(layout);
  options.queues = queues;
  options.sim_seed = seed;
  options.sanitize = sanitize;
  SessionDebugOptions debug;
  debug.drop_waits = drop_waits;
  auto session = create_session(l.graph, options, *plan_options_for(options), nullptr, debug);
  if (!session.is_ok()) return {session.status(), false};
  auto outputs = (*session)->run({l.input});
  if (!outputs.is_ok()) return {outputs.status(), false};
  std::vector<double> actual;
  for (int64_t i = 0; i < (*outputs)[0].num_elements(); ++i) actual.push_back((*outputs)[0].element_as_double(i));
  return {Status::ok(), compare_values(actual, l.expected, {1e-4, 1e-6, 0.9999}, false).passed};
}

class SimScenario : public ::testing::TestWithParam<Scenario> {};

TEST_P(SimScenario, TwoHundredSeedsCorrectWithoutFindings) {
  Loaded l = load(GetParam().model);
  for (int queues : {2, 3})
    for (uint64_t seed = 0; seed < 200; ++seed) {
      Outcome o = run_on_sim(l, GetParam().layout, queues, seed, true, false);
      ASSERT_TRUE(o.status.is_ok()) << "queues " << queues << " seed " << seed << ": " << o.status.to_string();
      ASSERT_TRUE(o.correct) << "queues " << queues << " seed " << seed;
    }
}

TEST_P(SimScenario, DroppedWaitsGiveWrongAnswersAndFindings) {
  Loaded l = load(GetParam().model);
  for (int queues : {2, 3}) {
    int wrong = 0;
    for (uint64_t seed = 0; seed < 200; ++seed) wrong += !run_on_sim(l, GetParam().layout, queues, seed, false, true).correct;
    EXPECT_GT(wrong, 0) << "no seed of " << queues << " queues noticed the dropped waits";
    Outcome sanitized = run_on_sim(l, GetParam().layout, queues, 0, true, true);
    ASSERT_EQ(sanitized.status.code(), StatusCode::kHazard) << sanitized.status.to_string();
    EXPECT_NE(sanitized.status.message().find("no wait orders them"), std::string::npos);
  }
}

INSTANTIATE_TEST_SUITE_P(Seeds, SimScenario,
                         ::testing::Values(Scenario{"LinearChunkLastDim_split_op17", "nchw"},
                                           Scenario{"LinearChunkFirstDim_split_op17", "nchw"},
                                           Scenario{"LinearNestedChunk_shape_op13", "nchw"},
                                           Scenario{"PointwiseC2f_split_op17", "nchw"},
                                           Scenario{"PointwiseC2f_shape_op13", "nhwc"},
                                           Scenario{"C2f_split_op17", "nhwc"}),
                         [](const ::testing::TestParamInfo<Scenario>& info) {
                           return info.param.model + "_" + info.param.layout;
                         });

// Every seed model, f32 and bf16, 50 sim seeds with 2 queues and the sanitizer on: zero
// findings, and each run within its dtype's tolerance of the reference.
class SimSeedModel : public ::testing::TestWithParam<std::string> {};

TEST_P(SimSeedModel, FiftySeedsF32AndBf16WithoutFindings) {
  Loaded l = load(GetParam());
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    Tolerance tolerance = default_tolerance(dtype);
    // The reference sees the input the model consumes.
    Tensor input = l.input;
    if (dtype == DType::kBF16)
      for (int64_t i = 0; i < input.num_elements(); ++i)
        input.data<float>()[i] = bf16::from_float(input.data<float>()[i]).to_float();
    auto reference = evaluate_reference(l.graph, {{l.graph.value(l.graph.inputs()[0]).name, input}});
    std::vector<double> expected;
    for (int64_t i = 0; i < reference->outputs[0].num_elements(); ++i)
      expected.push_back(reference->outputs[0].element_as_double(i));
    for (uint64_t seed = 0; seed < 50; ++seed) {
      SessionOptions options;
      options.device = "sim";
      options.queues = 2;
      options.sim_seed = seed;
      options.sanitize = true;
      options.dtype = dtype;
      auto session = create_session(l.graph, options);
      ASSERT_TRUE(session.is_ok()) << session.status().to_string();
      auto out = (*session)->run({l.input});
      ASSERT_TRUE(out.is_ok()) << dtype_name(dtype) << " seed " << seed << ": " << out.status().to_string();
      std::vector<double> actual;
      for (int64_t i = 0; i < (*out)[0].num_elements(); ++i) actual.push_back((*out)[0].element_as_double(i));
      Comparison c = compare_values(actual, expected, tolerance, false);
      ASSERT_TRUE(c.passed) << dtype_name(dtype) << " seed " << seed << ": " << c.reason;
    }
  }
}

std::vector<std::string> seed_models() {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(fs::path(STRIDER_SOURCE_DIR) / "models/seed"))
    if (fs::exists(entry.path() / "model.onnx")) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

INSTANTIATE_TEST_SUITE_P(Models, SimSeedModel, ::testing::ValuesIn(seed_models()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace strider
