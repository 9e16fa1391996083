// Golden plans: the seed models' plans as text, compared verbatim with tests/plan/golden/.
// A planner change that moves any value shows up here as a readable diff. To accept a
// deliberate change, rerun with STRIDER_UPDATE_GOLDEN=1 and review the diff in git.
//
// Also, for every seed model in both layouts, the figures the planner promises: no copy
// for any Split or Concat (a repeated concat part excepted), no materialization in nchw,
// and an arena within 10% of the most bytes live at once.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "exec/session_internal.h"
#include "onnx/importer.h"
#include "plan/dump.h"
#include "plan_test_util.h"

namespace strider {
namespace {
namespace fs = std::filesystem;

const fs::path kSeeds = fs::path(STRIDER_SOURCE_DIR) / "models/seed";
const fs::path kGolden = fs::path(STRIDER_SOURCE_DIR) / "tests/plan/golden";

struct PlanCase {
  std::string model, layout;
};

testing::PlannedGraph plan_seed(const PlanCase& c) {
  auto graph = import_model_file((kSeeds / c.model / "model.onnx").string());
  EXPECT_TRUE(graph.is_ok()) << graph.status().to_string();
  PlanOptions options = testing::verified();
  options.layout = *parse_layout(c.layout);
  return testing::plan_in_session(std::move(*graph), options, SessionOptions{});  // as `strider inspect` plans
}

class GoldenPlan : public ::testing::TestWithParam<PlanCase> {};

TEST_P(GoldenPlan, MatchesTheCommittedText) {
  testing::PlannedGraph p = plan_seed(GetParam());
  ASSERT_NE(p.plan, nullptr);
  std::string text = plan_to_text(*p.graph, *p.plan);
  fs::path file = kGolden / (GetParam().model + "." + GetParam().layout + ".txt");
  if (std::getenv("STRIDER_UPDATE_GOLDEN")) {
    std::ofstream(file) << text;
    return;
  }
  std::ifstream in(file);
  ASSERT_TRUE(in.good()) << file << " is missing; run with STRIDER_UPDATE_GOLDEN=1";
  std::stringstream golden;
  golden << in.rdbuf();
  EXPECT_EQ(text, golden.str()) << "plan of " << GetParam().model << " (" << GetParam().layout << ") changed";
}

std::vector<PlanCase> golden_cases() {
  std::vector<PlanCase> cases;
  for (const char* module : {"LinearChunkLastDim", "LinearChunkFirstDim", "LinearChunkCatLastDim",
                             "LinearNestedChunk", "PointwiseC2f", "C2f"})
    for (const char* variant : {"_shape_op13", "_split_op17"})
      for (const char* layout : {"nchw", "nhwc"}) cases.push_back({std::string(module) + variant, layout});
  return cases;
}

class SeedPlanFigures : public ::testing::TestWithParam<PlanCase> {};

TEST_P(SeedPlanFigures, NoCopiesTightArena) {
  testing::PlannedGraph p = plan_seed(GetParam());
  ASSERT_NE(p.plan, nullptr);
  const PlanStats& s = p.plan->stats;
  // LinearChunkCatLastDim concatenates [b, a, b]: the second b is a real copy.
  int repeated_parts = GetParam().model.rfind("LinearChunkCatLastDim", 0) == 0 ? 1 : 0;
  EXPECT_EQ(s.copies, repeated_parts);
  if (GetParam().layout == "nchw") {
    EXPECT_EQ(s.materializations, 0);
  }
  EXPECT_GT(s.views, 0);
  EXPECT_LE(double(s.arena_bytes), 1.10 * double(s.lower_bound_bytes));
}

std::vector<PlanCase> all_seed_cases() {
  std::vector<PlanCase> cases;
  for (const auto& entry : fs::directory_iterator(kSeeds))
    if (fs::exists(entry.path() / "model.onnx"))
      for (const char* layout : {"nchw", "nhwc"}) cases.push_back({entry.path().filename().string(), layout});
  std::sort(cases.begin(), cases.end(), [](const PlanCase& a, const PlanCase& b) {
    return a.model + a.layout < b.model + b.layout;
  });
  return cases;
}

auto case_name = [](const ::testing::TestParamInfo<PlanCase>& info) { return info.param.model + "_" + info.param.layout; };
INSTANTIATE_TEST_SUITE_P(Seeds, GoldenPlan, ::testing::ValuesIn(golden_cases()), case_name);
INSTANTIATE_TEST_SUITE_P(Seeds, SeedPlanFigures, ::testing::ValuesIn(all_seed_cases()), case_name);

}  // namespace
}  // namespace strider
