// The reference on the committed seed models (models/seed): its float64 outputs must
// match torch's f32 outputs to f32 accuracy. torch is an implementation independent of
// both the reference and the ONNX node-test generator.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "onnx/importer.h"
#include "onnx/tensor_proto.h"
#include "reference/reference.h"

namespace strider {
namespace {
namespace fs = std::filesystem;

TEST(ReferenceSeedModels, MatchTorchFloat32Outputs) {
  fs::path root = fs::path(STRIDER_SOURCE_DIR) / "models" / "seed";
  std::vector<fs::path> dirs;
  for (const auto& entry : fs::directory_iterator(root))
    if (fs::exists(entry.path() / "model.onnx")) dirs.push_back(entry.path());
  std::sort(dirs.begin(), dirs.end());
  ASSERT_FALSE(dirs.empty());
  for (const fs::path& dir : dirs) {
    SCOPED_TRACE(dir.filename().string());
    auto graph = import_model_file((dir / "model.onnx").string());
    ASSERT_TRUE(graph.is_ok()) << graph.status().to_string();
    std::map<std::string, Tensor> inputs;
    for (size_t i = 0; i < graph->inputs().size(); ++i) {
      auto t = read_tensor_pb((dir / "test_data_set_0" / fmt::format("input_{}.pb", i)).string());
      ASSERT_TRUE(t.is_ok()) << t.status().to_string();
      inputs.emplace(graph->value(graph->inputs()[i]).name, std::move(*t));
    }
    auto result = evaluate_reference(*graph, inputs);
    ASSERT_TRUE(result.is_ok()) << result.status().to_string();
    for (size_t i = 0; i < result->outputs.size(); ++i) {
      auto expected =
          read_tensor_pb((dir / "test_data_set_0" / fmt::format("output_{}.pb", i)).string());
      ASSERT_TRUE(expected.is_ok()) << expected.status().to_string();
      const RefTensor& actual = result->outputs[i];
      ASSERT_EQ(actual.shape, expected->shape());
      double scale = 0, worst = 0;
      for (int64_t k = 0; k < expected->num_elements(); ++k) {
        scale = std::max(scale, std::fabs(expected->element_as_double(k)));
        worst = std::max(worst,
                         std::fabs(actual.element_as_double(k) - expected->element_as_double(k)));
      }
      EXPECT_LE(worst, 1e-5 * std::max(scale, 1.0)) << "output " << i << " max abs error " << worst;
    }
  }
}

}  // namespace
}  // namespace strider
