// Every seed model (models/seed/*) in f32 and bf16, in both layouts, checked against torch's own outputs
// (saved when the models were generated) and against the float64 reference:
//   f32: max abs error within 1e-4 of the output scale, against both;
//   bf16: cosine >= 0.999 and max abs error within 2e-2 of the output scale.
#include <gtest/gtest.h>

#include <filesystem>

#include "strider/compare.h"
#include "exec/session_internal.h"
#include "onnx/importer.h"
#include "onnx/tensor_proto.h"
#include "passes/lower_precision.h"
#include "reference/reference.h"

namespace strider {
namespace {
namespace fs = std::filesystem;

std::vector<std::string> seed_models() {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(fs::path(STRIDER_SOURCE_DIR) / "models/seed"))
    if (fs::exists(entry.path() / "model.onnx")) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<double> values_of(const Tensor& t) {
  std::vector<double> v;
  for (int64_t i = 0; i < t.num_elements(); ++i) v.push_back(t.element_as_double(i));
  return v;
}

std::vector<double> values_of(const RefTensor& t) {
  std::vector<double> v;
  for (int64_t i = 0; i < t.num_elements(); ++i) v.push_back(t.element_as_double(i));
  return v;
}

struct ModelRun {
  Tensor input, output, torch_f32, torch_bf16;
  std::vector<double> reference;
};

void run_model(const std::string& name, const std::string& layout, DType dtype, ModelRun& run) {
  fs::path dir = fs::path(STRIDER_SOURCE_DIR) / "models/seed" / name;
  auto graph = import_model_file((dir / "model.onnx").string());
  ASSERT_TRUE(graph.is_ok()) << graph.status().to_string();
  run.input = *read_tensor_pb((dir / "test_data_set_0/input_0.pb").string());
  run.torch_f32 = *read_tensor_pb((dir / "test_data_set_0/output_0.pb").string());
  run.torch_bf16 = *read_tensor_pb((dir / "torch_bf16/output_0.pb").string());
  SessionOptions options;
  options.dtype = dtype;
  options.layout = *parse_layout(layout);
  options.poison_memory = true;  // an element no kernel writes stays NaN and fails the check
  auto session = create_session(*graph, options);
  ASSERT_TRUE(session.is_ok()) << session.status().to_string();
  auto outputs = (*session)->run({run.input});
  ASSERT_TRUE(outputs.is_ok()) << outputs.status().to_string();
  run.output = (*outputs)[0];
  // The reference sees the input the model consumed: rounded to bf16 in a bf16 run.
  Tensor consumed = run.input;
  if (dtype == DType::kBF16) consumed = *convert_float_tensor(*convert_float_tensor(run.input, DType::kBF16), DType::kF32);
  auto reference = evaluate_reference(*graph, {{graph->value(graph->inputs()[0]).name, consumed}});
  ASSERT_TRUE(reference.is_ok()) << reference.status().to_string();
  run.reference = values_of(reference->outputs[0]);
}

struct ModelCase {
  std::string model, layout;
};

class SeedModel : public ::testing::TestWithParam<ModelCase> {};

TEST_P(SeedModel, F32MatchesTorchAndTheFloat64Reference) {
  ModelRun run;
  ASSERT_NO_FATAL_FAILURE(run_model(GetParam().model, GetParam().layout, DType::kF32, run));
  Tolerance f32{1e-4, 0.0, 0.9999};
  Comparison vs_reference = compare_values(values_of(run.output), run.reference, f32, false);
  EXPECT_TRUE(vs_reference.passed) << vs_reference.reason;
  Comparison vs_torch = compare_values(values_of(run.output), values_of(run.torch_f32), f32, false);
  EXPECT_TRUE(vs_torch.passed) << vs_torch.reason;
}

TEST_P(SeedModel, BF16StaysWithinBf16Tolerance) {
  ModelRun run;
  ASSERT_NO_FATAL_FAILURE(run_model(GetParam().model, GetParam().layout, DType::kBF16, run));
  Tolerance bf16{2e-2, 0.0, 0.999};
  Comparison vs_reference = compare_values(values_of(run.output), run.reference, bf16, false);
  EXPECT_TRUE(vs_reference.passed) << vs_reference.reason << " cosine " << vs_reference.cosine;
  Comparison vs_torch = compare_values(values_of(run.output), values_of(run.torch_bf16), bf16, false);
  EXPECT_TRUE(vs_torch.passed) << vs_torch.reason << " cosine " << vs_torch.cosine;
  // bf16 must actually be used: the result differs from the f32 run.
  EXPECT_GT(vs_reference.max_abs_error, 0.0);
}

std::vector<ModelCase> cases() {
  std::vector<ModelCase> all;
  for (const std::string& model : seed_models())
    for (const char* layout : {"nchw", "nhwc"}) all.push_back({model, layout});
  return all;
}

INSTANTIATE_TEST_SUITE_P(Models, SeedModel, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<ModelCase>& info) {
                           return info.param.model + "_" + info.param.layout;
                         });

}  // namespace
}  // namespace strider
