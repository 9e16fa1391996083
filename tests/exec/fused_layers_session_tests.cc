// The gated stack and the WaveNet layer through a whole session: a CPU device that asks for
// both fusions (the CPU itself asks for neither: they save it nothing) runs the committed
// exports of the gated chain and of WaveNet, so the session's wiring (the gates fused as
// FusedGatedConv for the passes that fold them, then the stack and layer passes), the
// planner's layouts and buffers for a node of three outputs, some absent, and the CPU
// kernels run together, on one and two queues, channels-first and channels-last, against
// the float64 reference of the exported graph. The CUDA kernels get the same session on a
// GPU (scripts/gpu-check stack).
#include <gtest/gtest.h>

#include <string>

#include "base/memory_budget.h"
#include "exec/session_internal.h"
#include "hal/cpu/cpu_device.h"
#include "onnx/importer.h"
#include "ops/wavenet_layer.h"
#include "reference/reference.h"
#include "strider/tools.h"
#include "support/test_util.h"

namespace strider {
namespace {

class FusingCpuDevice final : public cpu::CpuDevice {
 public:
  using cpu::CpuDevice::CpuDevice;
  bool fuses_gated_stack(const GatedConvUnit&) const override { return true; }
  bool fuses_wavenet_layer(const WaveNetLayerShape&) const override { return true; }
};

struct Case {
  const char* model;
  Shape x;
  const char* fused_op;
  int fused_nodes;
};

size_t count(const std::string& text, const std::string& word) {
  size_t n = 0;
  for (size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) ++n;
  return n;
}

class FusedLayersSession : public ::testing::TestWithParam<std::tuple<Case, Layout, int>> {};

TEST_P(FusedLayersSession, MatchesTheReference) {
  const auto& [c, layout, queues] = GetParam();
  auto imported = import_model_file(std::string(STRIDER_SOURCE_DIR) + "/models/real/" + c.model + "/model.onnx");
  ASSERT_TRUE(imported.is_ok()) << imported.status().to_string();
  const Graph graph = std::move(*imported);
  SessionOptions options;
  options.layout = layout;
  options.queues = queues;
  auto resources = std::make_shared<SessionResources>();
  resources->budget = std::make_shared<MemoryBudget>(default_host_memory_budget());
  DeviceOptions device_options;
  device_options.queues = queues;
  device_options.budget = resources->budget;
  resources->device = std::make_shared<FusingCpuDevice>(device_options);
  resources->constants = std::make_shared<DeviceConstants>(resources->device);
  auto plan_options = plan_options_for(options);
  ASSERT_TRUE(plan_options.is_ok()) << plan_options.status().to_string();
  auto session = create_session(graph, options, *plan_options, resources);
  ASSERT_TRUE(session.is_ok()) << session.status().to_string();
  const std::string text = plan_text(**session);
  EXPECT_EQ(count(text, std::string(c.fused_op) + " '"), size_t(c.fused_nodes)) << text;
  for (uint32_t seed : {5u, 6u}) {
    const Tensor x = testing::random_tensor(DType::kF32, c.x, seed);
    auto ran = (*session)->run({x});
    ASSERT_TRUE(ran.is_ok()) << ran.status().to_string();
    auto expected = evaluate_reference(graph, {{graph.value(graph.inputs()[0]).name, x}});
    ASSERT_TRUE(expected.is_ok()) << expected.status().to_string();
    ASSERT_EQ(ran->size(), expected->outputs.size());
    for (size_t i = 0; i < ran->size(); ++i) {
      const Tensor want = ref_to_tensor(expected->outputs[i], DType::kF32);
      ASSERT_EQ((*ran)[i].shape(), want.shape()) << "output " << i;
      for (int64_t e = 0; e < want.num_elements(); ++e) {
        const double w = want.element_as_double(e);
        ASSERT_NEAR((*ran)[i].element_as_double(e), w, 1e-5 + 1e-5 * std::abs(w)) << "output " << i << " element " << e;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    CommittedExports, FusedLayersSession,
    ::testing::Combine(::testing::Values(Case{"GatedChain20_split_op17", {1, 64, 256}, "FusedGatedStack", 1},
                                         Case{"WaveNet8_split_op17", {1, 32, 1024}, "FusedWaveNetLayer", 8}),
                       ::testing::Values(Layout::kNchw, Layout::kNhwc), ::testing::Values(1, 2)),
    [](const auto& info) {
      const Case& c = std::get<0>(info.param);
      return std::string(c.fused_op) + "_" + std::string(layout_name(std::get<1>(info.param))) + "_q" +
             std::to_string(std::get<2>(info.param));
    });

}  // namespace
}  // namespace strider
