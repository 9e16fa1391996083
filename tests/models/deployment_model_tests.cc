// The detector with its post-processing in the graph (models/detector.py): a convolutional
// backbone, a score threshold (NonZero) and NonMaxSuppression, so the session splits twice
// (exec/staged_session.h). On cpu, sim and cuda (skipped without a GPU), in both layouts,
// the kept boxes, scores and cell indices match torch's run and the float64 reference: the
// indices exactly, the floats within 1e-4 (the model keeps every score and IoU at least
// 1e-4 from its threshold, so which boxes survive is not decided by rounding).
#include <gtest/gtest.h>

#include <filesystem>

#include "exec/session_internal.h"
#include "hal/cuda_device_factory.h"
#include "onnx/importer.h"
#include "onnx/tensor_proto.h"
#include "reference/reference.h"
#include "strider/tools.h"

namespace strider {
namespace {
namespace fs = std::filesystem;

const fs::path kFolder = fs::path(STRIDER_SOURCE_DIR) / "models/detector/TinyNmsDetector_op17";

void expect_same(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  ASSERT_EQ(got.shape(), want.shape()) << what;
  for (int64_t i = 0; i < want.num_elements(); ++i) {
    if (is_floating(want.dtype())) EXPECT_NEAR(got.element_as_double(i), want.element_as_double(i), 1e-4) << what << " " << i;
    else EXPECT_EQ(got.element_as_int(i), want.element_as_int(i)) << what << " " << i;
  }
}

class NmsDetector : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(NmsDetector, KeepsTheBoxesTorchKeeps) {
  const auto& [device, layout] = GetParam();
  if (device == "cuda" && !create_cuda_device(0, DeviceOptions{}).is_ok())
    GTEST_SKIP() << "no CUDA device: the cuda rows run on a GPU only";
  auto graph = import_model_file((kFolder / "model.onnx").string());
  ASSERT_TRUE(graph.is_ok()) << graph.status().to_string();
  auto input = read_tensor_pb((kFolder / "test_data_set_0/input_0.pb").string());
  ASSERT_TRUE(input.is_ok()) << input.status().to_string();
  SessionOptions options;
  options.device = device;
  options.layout = *parse_layout(layout);
  options.queues = 2;
  options.sanitize = true;
  auto session = create_session(*graph, options);
  ASSERT_TRUE(session.is_ok()) << session.status().to_string();
  EXPECT_NE(plan_text(**session).find("split at node '/NonZero' (NonZero)"), std::string::npos);
  auto outputs = (*session)->run({*input});
  ASSERT_TRUE(outputs.is_ok()) << outputs.status().to_string();
  auto reference = evaluate_reference(*graph, {{"x", *input}});
  ASSERT_TRUE(reference.is_ok()) << reference.status().to_string();
  ASSERT_EQ(outputs->size(), 3u);
  for (size_t k = 0; k < 3; ++k) {
    auto torch = read_tensor_pb((kFolder / ("test_data_set_0/output_" + std::to_string(k) + ".pb")).string());
    ASSERT_TRUE(torch.is_ok()) << torch.status().to_string();
    expect_same((*outputs)[k], *torch, "output " + std::to_string(k) + " against torch");
    expect_same(ref_to_tensor(reference->outputs[k], torch->dtype()), *torch, "reference output " + std::to_string(k));
  }
  EXPECT_GT((*outputs)[2].num_elements(), 10);  // boxes were kept
  EXPECT_LT((*outputs)[2].num_elements(), 27);  // and suppressed: 27 pass the score threshold
}

INSTANTIATE_TEST_SUITE_P(Devices, NmsDetector,
                         ::testing::Combine(::testing::Values("cpu", "sim", "cuda"), ::testing::Values("nchw", "nhwc")));

}  // namespace
}  // namespace strider
